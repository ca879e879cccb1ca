fn main() {
    println!("cargo:rerun-if-changed=sqlite-vec.c");
    println!("cargo:rerun-if-changed=sqlite-vec.h");
    let mut build = cc::Build::new();
    build
        .file("sqlite-vec.c")
        .define("SQLITE_CORE", None)
        // Upstream code as published: its warnings are not ours to fix.
        .warnings(false)
        .cargo_warnings(false);
    // sqlite3.h and sqlite3ext.h of the SQLite rusqlite bundles.
    if let Ok(dir) = std::env::var("DEP_SQLITE3_INCLUDE") {
        build.include(dir);
    }
    build.compile("sqlite_vec0");
}
