// Several copies in one dispatch (`Backend::copy_many`): the optimizer's gather of its
// gradients into one flat buffer and its scatter of the weights back out of it.
//
// copy_gather:  up to PIECES sources (s0..s6) into one destination d
// copy_scatter: one source s into up to PIECES destinations (d0..d6)
//
// Piece e copies len_e 32-bit words, src[src_offset_e + i] -> dst[dst_offset_e + i]
// (bit for bit). Each piece gets whole workgroups, the pieces' in order: piece e starts
// at workgroup first_e, so a workgroup finds its piece with a uniform scan. Unused binding
// slots are bound to buffers the params never name (count says how many pieces there are).

struct Piece {
    first: u32,
    len: u32,
    src_offset: u32,
    dst_offset: u32,
}

struct Params {
    count: u32,
    @align(16) pieces: array<Piece, 7>,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;

// The piece workgroup g copies, and the word of it this invocation copies (past the
// piece's end when the piece's last workgroup is not full).
fn locate(g: u32, lid: u32) -> vec2<u32> {
    var e = 0u;
    while (e + 1u < p.count && g >= p.pieces[e + 1u].first) {
        e++;
    }
    return vec2<u32>(e, (g - p.pieces[e].first) * WG + lid);
}

// What this invocation copies: (piece, source word, destination word), or a piece of
// NONE when its word lies past its piece's end.
const NONE: u32 = 7u;
fn word_to_copy(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec3<u32> {
    let at = locate(flat_group(wid, nwg), lid);
    let piece = p.pieces[at.x];
    if (at.y >= piece.len) {
        return vec3<u32>(NONE, 0u, 0u);
    }
    return vec3<u32>(at.x, piece.src_offset + at.y, piece.dst_offset + at.y);
}
