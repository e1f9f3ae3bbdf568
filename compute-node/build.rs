//! Compiles the C part of INCRBYFLOAT (csrc/long_double.c): its arithmetic
//! is C's `long double`, which Rust has no type for.

fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .warnings(true)
        .compile("splitkv_long_double");
}
