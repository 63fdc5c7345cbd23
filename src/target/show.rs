//! The text of `tilec --list-targets`: one line per target, and with `-v`
//! the details a schedule is written against (tile levels, memory levels).

use super::host::{fmt_bytes, fmt_num};
use super::{Target, TargetKind};
use std::fmt::Write;

impl Target {
    /// `name  kind  description`, aligned for listings.
    pub fn summary_line(&self) -> String {
        format!("{:<12} {:<5} {}", self.name, self.kind.name(), self.description)
    }

    /// Every field, readably, indented by four spaces (to follow
    /// [`Target::summary_line`] in a listing).
    pub fn details(&self) -> String {
        let mut s = String::new();
        let _ = self.write_details(&mut s);
        s
    }

    fn write_details(&self, s: &mut String) -> std::fmt::Result {
        let isa = &self.isa;
        write!(s, "    isa: {}, cpu {}, features {}", isa.triple, isa.cpu, isa.features)?;
        if isa.vector_bits > 0 {
            write!(s, ", {}-bit vectors", isa.vector_bits)?;
        }
        if isa.vector_registers > 0 {
            write!(s, ", {} vector registers", isa.vector_registers)?;
        }
        writeln!(s)?;
        let c = &self.compute;
        let unit = if self.kind == TargetKind::Cuda { "SMs" } else { "cores" };
        write!(s, "    compute: {} {unit} at {} GHz", c.units, fmt_num(c.clock_ghz))?;
        if self.kind == TargetKind::Cuda {
            write!(
                s,
                "; warp {}, at most {} threads per block, {} threads and {} blocks per SM, {} registers per SM, {} per thread",
                c.warp_size, c.max_threads_per_block, c.max_threads_per_unit, c.max_blocks_per_unit, c.registers_per_unit, c.max_registers_per_thread
            )?;
            write!(s, "; {} warps per block hide latency; {} of static shared memory per block", c.min_warps_per_block, fmt_bytes(c.max_static_shared_bytes))?;
        } else {
            write!(s, "; FMA latency {} cycles, {} misses in flight per core", fmt_num(c.fma_latency_cycles), fmt_num(c.misses_in_flight))?;
        }
        writeln!(s)?;
        if self.kind == TargetKind::Cpu {
            let m = &self.model;
            writeln!(
                s,
                "    model: guarded load {}, gathered lane {}, scattered lane {} (issue slots or cycles); latency hiding {}",
                fmt_num(m.guarded_load_cost),
                fmt_num(m.gather_load_cost),
                fmt_num(m.scatter_lane_cost),
                fmt_num(m.latency_hiding)
            )?;
        }
        let peaks: Vec<String> = self.peak_gflops.iter().map(|(t, v)| format!("{t} {}", fmt_num(*v))).collect();
        writeln!(s, "    peak GFLOP/s: {}", peaks.join(", "))?;
        writeln!(s, "    memory levels (slowest first):")?;
        for m in &self.memory {
            let mut extra = Vec::new();
            if let Some(u) = m.unit_capacity_bytes {
                extra.push(format!("{} per unit", fmt_bytes(u)));
            }
            if let Some(core) = m.core_bandwidth_gbs {
                extra.push(format!("at most {} GB/s per core", fmt_num(core)));
            }
            if m.banks > 0 {
                extra.push(format!("{} banks x {} bytes", m.banks, m.bank_width_bytes));
            }
            extra.push(if m.managed { "software-managed".into() } else { "hardware-managed".into() });
            match &m.scope {
                Some(scope) => extra.push(format!("scope {scope}")),
                None => extra.push("cannot be staged into".into()),
            }
            writeln!(
                s,
                "      {:<10} {:>10} per {:<6} {:>9} GB/s {:>7} ns  {:>3}-byte lines; {}",
                m.name,
                fmt_bytes(m.capacity_bytes),
                m.per.name(),
                fmt_num(m.bandwidth_gbs),
                fmt_num(m.latency_ns),
                m.line_bytes,
                extra.join(", ")
            )?;
        }
        writeln!(s, "    tile levels (outermost first):")?;
        for l in &self.tile_levels {
            writeln!(s, "      {:<10} memory {:<10} binding {}", l.name, l.memory, l.binding.name())?;
        }
        let order: Vec<String> = self.order.iter().map(|e| e.text(&self.tile_levels)).collect();
        writeln!(s, "    loop order: {}", order.join(" "))?;
        if !self.intrinsics.is_empty() {
            writeln!(s, "    intrinsics:")?;
            for x in &self.intrinsics {
                let l = &x.layout;
                write!(s, "      {:<38} {:<4} {}x{}x{} {} x {} -> {}", x.name, x.kind, x.m, x.n, x.k, x.a, x.b, x.acc)?;
                write!(s, ", {}/{}/{}, latency {}, {}/clock", l.a.name(), l.b.name(), l.acc.name(), x.latency_cycles, x.per_cycle)?;
                if !x.features.is_empty() {
                    let needs: Vec<String> = x.features.iter().map(|f| format!("+{f}")).collect();
                    write!(s, ", needs {}", needs.join(","))?;
                    if !self.offers(x) {
                        write!(s, " (not offered: not in the ISA features)")?;
                    }
                }
                writeln!(s)?;
            }
        }
        writeln!(s, "    sources:")?;
        for src in &self.sources {
            writeln!(s, "      - {src}")?;
        }
        Ok(())
    }
}
