// Prepended to every kernel.
//
// One-dimensional launches fold their workgroups into a 2-D grid when there are more than
// `max_compute_workgroups_per_dimension` of them (the host picks the grid, see
// `recorder.rs`); `flat_group` undoes the fold. Kernels bound-check the flat index
// because the folded grid may hold a few workgroups past the end.
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// tanh through exp(-2|u|): finite for every input (exp never overflows).
fn tanh_stable(u: f32) -> f32 {
    let e = exp(-2.0 * abs(u));
    return sign(u) * (1.0 - e) / (1.0 + e);
}
