// Dropout's mask rule (tensor/src/dropout.rs, the contract): element i of a site is kept
// when fmix32(fmix32((offset + i) ^ key0) ^ key1) >= threshold, and then multiplied by
// `scale`; a dropped one becomes 0. `on` = 0 keeps everything unscaled (no dropout).
// Kernels put the mask's fields in their own parameter block and build one of these.

struct DropoutMask {
    key0: u32,
    key1: u32,
    threshold: u32,
    offset: u32,
    scale: f32,
    on: u32,
}

// MurmurHash3's 32-bit finaliser.
fn fmix32(h0: u32) -> u32 {
    var h = h0;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

// The factor for the buffer's element i: `scale` when kept, 0 when dropped, 1 when off.
fn dropout_factor(m: DropoutMask, i: u32) -> f32 {
    if (m.on == 0u) {
        return 1.0;
    }
    let bits = fmix32(fmix32((m.offset + i) ^ m.key0) ^ m.key1);
    return select(0.0, m.scale, bits >= m.threshold);
}
