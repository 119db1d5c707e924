//! What the kernel benchmarks share: the `--threads 1,2` list, a backend per supported
//! variant, and the fastest-call timer (on a shared machine, the calls that were not
//! preempted say what the kernel costs; a call takes milliseconds, a time slice more).

#![allow(dead_code)] // each example uses its own part of this module

use std::time::Instant;

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant};

/// Removes `--threads LIST` from `args` and returns the list (`[1]` when absent).
pub fn take_threads(args: &mut Vec<String>) -> Result<Vec<usize>, String> {
    let Some(i) = args.iter().position(|a| a == "--threads") else {
        return Ok(vec![1]);
    };
    let list = args.get(i + 1).ok_or("--threads needs a list, e.g. 1,2")?.clone();
    let threads = list
        .split(',')
        .map(|t| t.parse().map_err(|_| format!("bad --threads {list:?}")))
        .collect::<Result<_, _>>()?;
    args.drain(i..i + 2);
    Ok(threads)
}

/// A backend on `threads` threads running `variant`, built as the CLI builds its own (the
/// calling thread runs pieces too), so the figures are those a training step gets.
pub fn backend(threads: usize, variant: KernelVariant) -> Result<CpuBackend, String> {
    CpuBackend::try_new_on_this_thread(threads)
        .map_err(|e| e.to_string())?
        .with_variant(variant)
        .map_err(|e| e.to_string())
}

/// The variants this CPU can run.
pub fn supported_variants() -> impl Iterator<Item = KernelVariant> {
    KernelVariant::ALL.into_iter().filter(|v| v.is_supported())
}

/// Removes `--kernels LIST` (variant names, e.g. `simd128-relaxed`) from `args` and returns
/// the supported variants it names, or all supported ones when absent: the reference takes
/// minutes at a 124M model's shapes.
pub fn take_variants(args: &mut Vec<String>) -> Result<Vec<KernelVariant>, String> {
    let Some(i) = args.iter().position(|a| a == "--kernels") else {
        return Ok(supported_variants().collect());
    };
    let list = args.get(i + 1).ok_or("--kernels needs a list, e.g. simd128-relaxed")?.clone();
    let named: Vec<&str> = list.split(',').collect();
    if let Some(unknown) = named.iter().find(|n| !KernelVariant::ALL.iter().any(|v| v.name() == **n)) {
        return Err(format!("unknown kernel variant {unknown:?} in --kernels {list:?}"));
    }
    args.drain(i..i + 2);
    Ok(supported_variants().filter(|v| named.contains(&v.name())).collect())
}

/// Seconds of the fastest call of `f`, over about 0.3 s of calls (2 to 5,000).
pub fn fastest_secs(f: &dyn Fn()) -> f64 {
    let fastest_of = |reps: usize| {
        (0..reps)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let once = fastest_of(2);
    fastest_of(((0.3 / once.max(1e-6)) as usize).clamp(2, 5000))
}
