//! The inputs of a run: iteration `i` of target `t` under seed `s` is a
//! function of `(s, t, i)` and the repository's seed files alone, so a
//! seed reproduces a run. Each iteration draws a source: a generated
//! program, a generated one mutated, a repository file mutated, or a
//! program generated from mutated choice bytes.

use crate::choices::{G, SplitMix, iteration_rng};
use crate::generate::{Config, level0, loops, pipeline};
use crate::mutate::{PIPELINE_WORDS, TILE_WORDS, mutate};
use crate::targets::Target;

/// How many choice bytes a generated program may read.
const CHOICE_BYTES: usize = 4096;

pub struct Inputs {
    pub target: Target,
    pub seed: u64,
    tile_seeds: Vec<Vec<u8>>,
    pipeline_seeds: Vec<Vec<u8>>,
}

impl Inputs {
    pub fn new(target: Target, seed: u64) -> Inputs {
        let (tile_seeds, pipeline_seeds) = match target {
            Target::Parse => (crate::corpus::tile_seeds(), Vec::new()),
            Target::Pipeline => (Vec::new(), crate::corpus::pipeline_seeds()),
            _ => (Vec::new(), Vec::new()),
        };
        Inputs {
            target,
            seed,
            tile_seeds,
            pipeline_seeds,
        }
    }

    /// How many repository files mutation starts from.
    pub fn seed_files(&self) -> usize {
        self.tile_seeds.len() + self.pipeline_seeds.len()
    }

    pub fn input(&self, index: u64) -> Vec<u8> {
        let mut rng = iteration_rng(self.seed, self.target.name(), index);
        let choices = rng.bytes(CHOICE_BYTES);
        match self.target {
            Target::Parse => self.parse_input(&mut rng, choices),
            Target::Pipeline => self.pipeline_input(&mut rng, choices),
            Target::Interp => interp_input(&mut rng, choices),
            Target::Compile => compile_input(&mut rng, choices),
            Target::SelfTest => b"pass".to_vec(),
        }
    }

    fn parse_input(&self, rng: &mut SplitMix, mut choices: Vec<u8>) -> Vec<u8> {
        let source = weighted(
            rng,
            &[3, 1, 3, if self.tile_seeds.is_empty() { 0 } else { 4 }, 1],
        );
        let generate = |choices: &[u8]| {
            let mut g = G::new(choices);
            if g.chance(1, 5) {
                loops::function(&mut g, &Config::parse()).into_bytes()
            } else {
                level0::module(&mut g, &Config::parse()).into_bytes()
            }
        };
        let others: Vec<&[u8]> = self.tile_seeds.iter().map(Vec::as_slice).collect();
        match source {
            0 => generate(&choices),
            1 => {
                // Valid programs too: what the verifier accepts must print back.
                let mut g = G::new(&choices);
                let cfg = Config {
                    invalid: 0,
                    schedule: 40,
                    ..Config::parse()
                };
                if g.chance(1, 3) {
                    loops::function(&mut g, &cfg).into_bytes()
                } else {
                    level0::module(&mut g, &cfg).into_bytes()
                }
            }
            2 => {
                let mut data = generate(&choices);
                mutate(rng, &mut data, TILE_WORDS, &others);
                data
            }
            3 => {
                let mut data = self.tile_seeds[rng.below(self.tile_seeds.len())].clone();
                mutate(rng, &mut data, TILE_WORDS, &others);
                data
            }
            _ => {
                // Structure-aware: the generator reads mutated choices.
                mutate(rng, &mut choices, &[], &[]);
                generate(&choices)
            }
        }
    }

    fn pipeline_input(&self, rng: &mut SplitMix, choices: Vec<u8>) -> Vec<u8> {
        let registry = crate::targets::registry();
        let source = weighted(
            rng,
            &[5, 3, if self.pipeline_seeds.is_empty() { 0 } else { 2 }],
        );
        let mut g = G::new(&choices);
        let others: Vec<&[u8]> = self.pipeline_seeds.iter().map(Vec::as_slice).collect();
        match source {
            0 => pipeline::pipeline(&mut g, registry, 8).into_bytes(),
            1 => {
                let mut data = pipeline::pipeline(&mut g, registry, 0).into_bytes();
                mutate(rng, &mut data, PIPELINE_WORDS, &others);
                data
            }
            _ => {
                let mut data = self.pipeline_seeds[rng.below(self.pipeline_seeds.len())].clone();
                mutate(rng, &mut data, PIPELINE_WORDS, &others);
                data
            }
        }
    }
}

fn weighted(rng: &mut SplitMix, weights: &[u64]) -> usize {
    let total: u64 = weights.iter().sum();
    let mut x = rng.next_u64() % total.max(1);
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    0
}

fn interp_input(rng: &mut SplitMix, choices: Vec<u8>) -> Vec<u8> {
    let mut g = G::new(&choices);
    match weighted(rng, &[4, 3, 3, 1]) {
        0 => level0::module(&mut g, &Config::interp()).into_bytes(),
        1 => {
            // Level 1: every op scheduled for one target, then lowered by the passes.
            let target = g.pick(&["x86-avx2", "sm90", "x86-avx512", "sm80"]);
            let cfg = Config {
                schedule: 100,
                schedule_target: Some(target),
                max_ops: 1,
                ..Config::interp()
            };
            level0::function(&mut g, &cfg, "f").0.into_bytes()
        }
        2 => loops::function(&mut g, &Config::interp()).into_bytes(),
        _ => {
            // Mutated a little: what still verifies must still run.
            let mut data = level0::module(&mut g, &Config::interp()).into_bytes();
            mutate(rng, &mut data, TILE_WORDS, &[]);
            data
        }
    }
}

fn compile_input(rng: &mut SplitMix, choices: Vec<u8>) -> Vec<u8> {
    let mut g = G::new(&choices);
    if weighted(rng, &[3, 1]) == 0 {
        level0::function(&mut g, &Config::compile(), "f")
            .0
            .into_bytes()
    } else {
        // Scheduled for x86-avx2 (which this machine may run) instead of searched.
        let cfg = Config {
            schedule: 100,
            schedule_target: Some("x86-avx2"),
            max_ops: 1,
            ..Config::compile()
        };
        level0::function(&mut g, &cfg, "f").0.into_bytes()
    }
}
