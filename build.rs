//! Generates the tile-syntax parser from `src/syntax/grammar.lalrpop` into
//! `$OUT_DIR/syntax/grammar.rs`.
fn main() {
    lalrpop::Configuration::new()
        .set_in_dir("src")
        .set_out_dir(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .process()
        .expect("lalrpop failed to generate the tile parser");
    println!("cargo:rerun-if-changed=src/syntax/grammar.lalrpop");
}
