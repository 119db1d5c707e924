//! Tells kernels-cpu's tests which x86-64 kernel variants the building CPU runs, as cfgs
//! (`tinygpt_cpu_avx2_fma`, `tinygpt_cpu_avx512`): the conformance tests of a variant the CPU
//! lacks are compiled as ignored, so `cargo test` counts them as ignored rather than passed
//! (libtest cannot ignore a test at run time). Only for native builds (host = target); the
//! library itself picks variants at run time and does not read these. A target dir carried
//! to another CPU keeps the first CPU's answer: the tests then fail, saying so, where a
//! variant is missing.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tinygpt_cpu_avx2_fma)");
    println!("cargo::rustc-check-cfg=cfg(tinygpt_cpu_avx512)");
    println!("cargo::rerun-if-changed=build.rs");
    let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    #[cfg(target_arch = "x86_64")]
    if native {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            println!("cargo::rustc-cfg=tinygpt_cpu_avx2_fma");
        }
        if is_x86_feature_detected!("avx512f") {
            println!("cargo::rustc-cfg=tinygpt_cpu_avx512");
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = native;
}
