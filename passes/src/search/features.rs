//! TEMPORARY stand-in until the features branch lands.
use super::space::{Config, Problem};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureSet {
    Analytical,
    Loops,
}

impl FeatureSet {
    pub const NAMES: [&'static str; 2] = ["af", "loops"];
    pub fn from_name(name: &str) -> Option<FeatureSet> {
        match name {
            "af" => Some(FeatureSet::Analytical),
            "loops" => Some(FeatureSet::Loops),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FeatureSet::Analytical => "af",
            FeatureSet::Loops => "loops",
        }
    }
    pub fn columns(self, _p: &Problem) -> Vec<&'static str> {
        vec!["t0", "t1", "t2", "t3", "bias"]
    }
    pub fn extract(self, p: &Problem, cfg: &Config) -> Vec<f32> {
        let mut v: Vec<f32> = (0..4).map(|l| if l < p.levels { (p.traffic(cfg, l) / p.flops) as f32 } else { 0.0 }).collect();
        v.push(1.0);
        v
    }
}
