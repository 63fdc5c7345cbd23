//! tilec's transformations. Each pass is declared once (a static
//! `PassDecl`) and registered in [`registry`].

pub mod canonicalize;

use tilec::pass::Registry;

/// Every pass tilec knows, in the order `--list-passes` shows them.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(&canonicalize::DECL);
    r
}
