//! Gives the shared library its soname, so programs linked against
//! libbulkmem.so record libbulkmem.so.0 and keep working across compatible
//! releases (scripts/install installs the links).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libbulkmem.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
