//! `coop.rs` without a device: every variant of matmul_coop.wgsl parses, validates with the
//! capabilities the device would ask for, and becomes SPIR-V (no driver here offers
//! cooperative matrices, so the H200 runs it first; see `precision.rs` for its self-test),
//! and the plan follows from what an adapter reports.

use wgpu::naga;
use wgpu::{CooperativeMatrixProperties, CooperativeScalarType as S, Features};

use super::{plan, source, CoopOffer, CoopPlan, CoopTile, CoopVariant, TILE_LARGE, TILE_SMALL};
use crate::pipelines::COMMON;

fn validate(v: CoopVariant) -> Result<naga::Module, String> {
    let text = format!("{}\n{COMMON}", source(v));
    let module = naga::front::wgsl::parse_str(&text).map_err(|e| e.emit_to_string(&text))?;
    // (The emulated variants must not need cooperative matrices.)
    let coop = if v.emulated {
        naga::valid::Capabilities::empty()
    } else {
        naga::valid::Capabilities::COOPERATIVE_MATRIX
    };
    let caps = coop | naga::valid::Capabilities::SHADER_FLOAT16 | naga::valid::Capabilities::SUBGROUP;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(&text))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        ..Default::default()
    };
    naga::back::spv::write_vec(&module, &info, &options, None).map_err(|e| format!("SPIR-V: {e}"))?;
    Ok(module)
}

#[test]
fn every_variant_validates_and_writes_spirv_emulated_ones_without_cooperative_matrices() {
    let mut n = 0;
    for tile in [TILE_LARGE, TILE_SMALL] {
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            for (checked, vec4) in [(false, true), (false, false), (true, false)] {
                for (split, bias, onto) in
                    [(1, false, false), (1, true, false), (1, false, true), (4, false, false)]
                {
                    for (subgroup, emulated) in [(32, false), (64, false), (8, true)] {
                        let v = CoopVariant {
                            tile,
                            trans_a,
                            trans_b,
                            checked,
                            vec4,
                            split,
                            bias,
                            onto,
                            subgroup,
                            emulated,
                        };
                        validate(v).unwrap_or_else(|e| panic!("{v:?}:\n{e}"));
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 288);
}

#[test]
fn accumulators_are_unrolled_one_per_fragment() {
    let v = CoopVariant {
        tile: TILE_LARGE,
        subgroup: 32,
        trans_a: false,
        trans_b: true,
        checked: true,
        split: 1,
        vec4: false,
        bias: true,
        onto: false,
        emulated: false,
    };
    let text = source(v);
    // 128 × 128 in 2 × 4 subgroups: 64 × 32 each, 4 × 2 accumulators.
    assert_eq!(text.matches("coopMultiplyAdd(").count(), 8);
    assert_eq!(text.matches("= a_frag(").count(), 4);
    assert_eq!(text.matches("= b_frag(").count(), 2);
    assert_eq!(text.matches("write_out(lid, m0, n0, ").count(), 8);
    assert!(text.starts_with("enable f16;\nenable wgpu_cooperative_matrix;\n"));
    assert!(!text.lines().any(|l| l.trim().starts_with("// @")), "a marker was left unreplaced");
}

fn prop(m: u32, n: u32, k: u32, ab: S, cr: S) -> CooperativeMatrixProperties {
    CooperativeMatrixProperties {
        m_size: m,
        n_size: n,
        k_size: k,
        ab_type: ab,
        cr_type: cr,
        saturating_accumulation: false,
    }
}

fn all_features() -> Features {
    Features::EXPERIMENTAL_COOPERATIVE_MATRIX | Features::SHADER_F16 | Features::SUBGROUP
}

/// An H200 as its Vulkan driver reports it (several sizes, subgroups of 32, 48 KiB).
fn h200_properties() -> Vec<CooperativeMatrixProperties> {
    vec![
        prop(16, 8, 16, S::F16, S::F16),
        prop(16, 8, 8, S::F16, S::F32),
        prop(16, 16, 16, S::F16, S::F16),
        prop(16, 16, 16, S::F16, S::F32),
        prop(16, 8, 8, S::F32, S::F32),
    ]
}

fn offer(properties: &[CooperativeMatrixProperties]) -> CoopOffer<'_> {
    CoopOffer {
        features: all_features(),
        properties,
        subgroup_max_size: 32,
        max_invocations: 1024,
        max_workgroup_bytes: 49152,
    }
}

#[test]
fn an_adapter_with_16x16x16_f16_f32_and_the_features_gets_the_large_tile() {
    let props = h200_properties();
    assert_eq!(
        plan(&offer(&props)),
        Ok(CoopPlan { subgroup: 32, large: true, always_large: false, emulated: false })
    );
    // The large tile needs 48 KiB for its widest layout (A plain, B transposed).
    assert_eq!(TILE_LARGE.workgroup_bytes(false, true), 49152);
    let small_memory = CoopOffer { max_workgroup_bytes: 32768, ..offer(&props) };
    assert_eq!(
        plan(&small_memory),
        Ok(CoopPlan { subgroup: 32, large: false, always_large: false, emulated: false })
    );
    // Subgroups of 64 (AMD): 8 × 64 invocations still fit 1024.
    let wide = CoopOffer { subgroup_max_size: 64, ..offer(&props) };
    assert_eq!(plan(&wide), Ok(CoopPlan { subgroup: 64, large: true, always_large: false, emulated: false }));
}

#[test]
fn an_adapter_without_the_configuration_or_a_feature_is_refused_with_a_reason() {
    let none: Vec<CooperativeMatrixProperties> = Vec::new();
    assert_eq!(plan(&offer(&none)), Err("no cooperative matrices listed".into()));
    let f32_only = vec![prop(8, 8, 8, S::F32, S::F32)];
    assert_eq!(plan(&offer(&f32_only)), Err("no f16×f16→f32 cooperative matrices listed".into()));
    let other_size = vec![prop(16, 8, 16, S::F16, S::F32)];
    assert!(plan(&offer(&other_size)).unwrap_err().contains("16×8×16, not the 16×16×16"));
    let props = h200_properties();
    for (missing, why) in [
        (Features::EXPERIMENTAL_COOPERATIVE_MATRIX, "wgpu does not offer them here"),
        (Features::SHADER_F16, "no shader-f16"),
        (Features::SUBGROUP, "no subgroups"),
    ] {
        let o = CoopOffer { features: all_features() - missing, ..offer(&props) };
        let err = plan(&o).unwrap_err();
        assert!(err.ends_with(why), "{err}");
    }
    let tiny = CoopOffer { max_invocations: 64, ..offer(&props) };
    assert!(plan(&tiny).unwrap_err().contains("do not fit the kernel"));
}

#[test]
fn tiles_split_into_whole_accumulators() {
    for t in [TILE_LARGE, TILE_SMALL] {
        let CoopTile { bm, bn, bk, wm, wn } = t;
        assert!(bm % (wm * 16) == 0 && bn % (wn * 16) == 0 && bk % 16 == 0, "{t:?}");
    }
}
