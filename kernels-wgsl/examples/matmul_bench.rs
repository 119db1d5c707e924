//! Matmul throughput on the wgpu backend, one JSON line `{m, n, k, gflops, ...}` per shape.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example matmul_bench -- 4096x4096x4096 2048x256x1024
//! ```
//!
//! Shapes are `MxNxK` (C [m, n] = A [m, k] · B [k, n]); an optional suffix `:nt`, `:tn` or
//! `:tt` transposes B, A or both (the layouts a linear layer's forward and weight
//! gradient use). A group follows: `*P` times `matmul_many` of P products (`*Pa`: all
//! sharing one A, as the q, k, v projections do; `*Pb`: one B, as their weight gradients
//! do), `+P` times `matmul_sum` of P terms; `:bias` adds a bias to each product, e.g.
//! `16384x384x384:nt*3a:bias`. Each shape is timed over enough repetitions to fill ~0.5 s
//! after one warm-up, the GPU waited on at the end (`sync`); the FLOPs count every product.

use std::time::Instant;

use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, Backend, MatmulDims, MatmulTerm};

/// A shape argument: the dims, the group (`'*'` many, `'+'` sum, with its size and
/// shared operand) and whether products have a bias.
struct Case {
    dims: MatmulDims,
    group: Option<(char, usize, Option<char>)>,
    bias: bool,
}

fn parse(shape: &str) -> Result<Case, String> {
    let (rest, bias) = shape.strip_suffix(":bias").map_or((shape, false), |r| (r, true));
    let Some(at) = rest.find(['*', '+']) else { return Ok(Case { dims: rest.parse()?, group: None, bias }) };
    let (dims, group) = rest.split_at(at);
    let kind = group.chars().next().expect("a group mark");
    let shared = group.chars().last().filter(|c| ['a', 'b'].contains(c));
    let count = group[1..group.len() - usize::from(shared.is_some())]
        .parse()
        .map_err(|_| format!("bad group in {shape:?}"))?;
    Ok(Case { dims: dims.parse()?, group: Some((kind, count, shared)), bias })
}

fn main() -> Result<(), String> {
    let shapes: Vec<String> = std::env::args().skip(1).collect();
    let shapes = if shapes.is_empty() { vec!["4096x4096x4096".to_string()] } else { shapes };
    let backend = WgpuBackend::new().map_err(|e| e.to_string())?;
    for shape in shapes {
        let Case { dims, group, bias } = parse(&shape)?;
        let MatmulDims { m, k, n, .. } = dims;
        let count = group.map_or(1, |(_, count, _)| count);
        let shared = group.and_then(|(_, _, shared)| shared);
        let a: Vec<_> = (0..if shared == Some('a') { 1 } else { count })
            .map(|_| backend.upload(&vec![0.5f32; m * k]))
            .collect();
        let b: Vec<_> = (0..if shared == Some('b') { 1 } else { count })
            .map(|_| backend.upload(&vec![0.25f32; k * n]))
            .collect();
        let biases: Vec<_> = (0..count).map(|_| backend.upload(&vec![0.125f32; n])).collect();
        let terms: Vec<_> = (0..count)
            .map(|i| MatmulTerm {
                a: &a[i.min(a.len() - 1)],
                b: &b[i.min(b.len() - 1)],
                bias: bias.then_some(&biases[i]),
            })
            .collect();
        let run = |reps: usize| -> Result<f64, String> {
            let t = Instant::now();
            for _ in 0..reps {
                match group {
                    None => drop(backend.matmul(terms[0].a, terms[0].b, terms[0].bias, dims)),
                    Some(('*', ..)) => drop(backend.matmul_many(&terms, dims)),
                    Some(_) => drop(backend.matmul_sum(&terms, dims)),
                }
            }
            block_on(backend.sync()).map_err(|e| e.to_string())?;
            Ok(t.elapsed().as_secs_f64())
        };
        run(1)?;
        let flop = 2.0 * m as f64 * n as f64 * k as f64 * count as f64;
        let once = run(3)? / 3.0;
        let reps = ((0.5 / once.max(1e-6)) as usize).clamp(3, 2000);
        let secs = run(reps)? / reps as f64;
        let line = format!(
            "{{\"shape\":\"{shape}\",\"m\":{m},\"n\":{n},\"k\":{k},\"layout\":\"{}\",\"gflops\":{:.1},\"ms\":{:.4},\"adapter\":\"{}\",\"path\":\"{:?}\"}}",
            ["nn", "nt", "tn", "tt"][usize::from(dims.trans_a) * 2 + usize::from(dims.trans_b)],
            flop / secs / 1e9,
            secs * 1e3,
            backend.adapter().name,
            backend.matmul_path(),
        );
        println!("{line}");
    }
    Ok(())
}
