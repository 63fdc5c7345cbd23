//! tilec's transformations. Each pass is declared once (a static
//! `PassDecl`) and registered in [`registry`].

pub mod apply_records;
pub mod canonicalize;
pub mod collapse;
pub mod pad_axes;
pub mod fuse;
pub mod samples;
mod nest;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod schedule_props;
pub mod tile;
pub mod bind;
pub mod cache;
pub mod hoist_guards;
pub mod prepack;
pub mod unroll;
pub mod vectorize;
pub mod vthread;
pub mod search;
pub mod tensorize;

use std::sync::Arc;
use tilec::diag::{Diagnostics, SourceMap};
use tilec::pass::{PassManager, Registry, parse_pipeline};
use tilec::target::Target;

/// The passes the default pipeline runs before `search`
/// (`tilec_codegen::driver::scheduling_pipeline`): `collapse-axes` (a 1x1
/// convolution over fewer, longer axes) and `pad-axes` (a reduction
/// lengthened onto the target's dot intrinsics). What `search` tunes, and
/// so what records name and what TLM's prompts must show, is the op after
/// them.
pub const BEFORE_SEARCH: &[&str] = &["collapse-axes", "pad-axes"];

/// [`BEFORE_SEARCH`] as a pass manager for `target`, to run on each module
/// as the default pipeline does before `search`: for tools that build
/// search problems outside a pipeline (TLM's prompts, `tilec-bench
/// --model-quality`).
pub fn before_search(target: &Arc<Target>, sources: &mut SourceMap) -> Result<PassManager, Diagnostics> {
    let text = format!("builtin.module({})", BEFORE_SEARCH.join(","));
    let file = sources.add("<before search>", text.clone());
    let mut pm = PassManager::new(parse_pipeline(&text, file, &registry())?);
    pm.set_target(target.clone());
    Ok(pm)
}

/// Every pass tilec knows, in the order `--list-passes` shows them.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(&canonicalize::DECL);
    r.register(&fuse::DECL);
    r.register(&collapse::DECL);
    r.register(&pad_axes::DECL);
    r.register(&search::DECL);
    r.register(&apply_records::DECL);
    r.register(&tile::DECL);
    r.register(&cache::DECL);
    r.register(&vthread::DECL);
    r.register(&bind::DECL);
    r.register(&unroll::DECL);
    r.register(&vectorize::DECL);
    r.register(&tensorize::DECL);
    r.register(&prepack::DECL);
    r.register(&hoist_guards::DECL);
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_declared_default_parses() {
        for decl in super::registry().iter() {
            // Panics (a bug in the declaration) if a default is invalid.
            let options = tilec::pass::PassOptions::defaults(decl.options);
            let _ = (decl.create)(&options);
        }
    }
}
