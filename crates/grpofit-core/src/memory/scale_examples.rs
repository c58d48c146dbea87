//! Worked examples for issue 21's terms ("Fidelity at scale"): each figure derived by hand from
//! the pinned packages' code cited in `spread.rs`, `frozen.rs` and `estimate.rs`, then checked
//! against the estimator. Qwen2.5-7B-Instruct throughout unless said:
//! P = 7,615,616,512 parameters (its count is derived in `frozen.rs`' tests), the largest
//! module its embedding (and untied head), 152,064 x 3,584 = 544,997,376.

use crate::arch::catalog;
use crate::run::spread::{
    Engine, Spread, fsdp_gathered, full_finetuning_states, largest_layer_parameters,
};

const P: u64 = 7_615_616_512;
const EMBED: u64 = 544_997_376;

fn arch(id: &str) -> crate::arch::Arch {
    catalog::find(id).expect("in the catalog").arch
}

fn deepspeed(stage: u8, offload: bool) -> Spread {
    Spread {
        engine: Engine::DeepSpeed,
        zero_stage: stage,
        offload_optimizer: offload,
        ..Spread::default()
    }
}

#[test]
fn full_fine_tuning_at_trls_default_fp32_under_ddp() {
    // create_model_from_path loads float32; accelerate's DDP casts nothing; torch AdamW's
    // moments are zeros_like(p): fp32 too.
    let a = arch("Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(a.parameters(), P);
    // 8 processes: weights 4P + gradients 4P + moments 8P + DDP buckets 4P = 20P
    // = 152,312,330,240 B = 141.85 GiB (bf16 said 10P = 76,156,165,120 B = 70.93 GiB)
    let fp32 = full_finetuning_states(&a, &Spread::default(), 8, 4, 8);
    assert_eq!(fp32.on_gpu(), 152_312_330_240);
    assert_eq!(fp32.buckets, 30_462_466_048);
    // one process: no DDP wrapper (accelerate `prepare_model` needs `multi_device`), so no
    // buckets: 16P = 121,849,864,192 B = 113.48 GiB
    let one = full_finetuning_states(&a, &Spread::default(), 1, 4, 8);
    assert_eq!(one.on_gpu(), 121_849_864_192);
    assert_eq!(one.buckets, 0);
    // bf16 on one GPU: 2P + 2P + 4P = 8P = 60,924,932,096 B = 56.74 GiB (was 10P: 14.18 GiB
    // of buckets too many)
    let bf16 = full_finetuning_states(&a, &Spread::default(), 1, 2, 4);
    assert_eq!(bf16.on_gpu(), 60_924_932_096);
}

#[test]
fn zero_2_keeps_bf16_gradient_partitions_and_two_reduce_buckets() {
    let a = arch("Qwen/Qwen2.5-7B-Instruct");
    // 7 GPUs: 16-bit params 2P = 15,231,233,024; bf16 gradient partition 2P/7 = 2,175,890,432;
    // fp32 params + Adam 12P/7 = 13,055,342,592; two reduce buckets of 5e8 bf16 elements
    // (overlap_comm) = 2,000,000,000. Sum 32,462,466,048 B = 30.23 GiB (the estimator's 18P/N
    // with no buckets said 34,814,246,912 B = 32.42 GiB).
    let s = full_finetuning_states(&a, &deepspeed(2, false), 7, 2, 8);
    assert_eq!(s.gradients, 2_175_890_432);
    assert_eq!(s.buckets, 2_000_000_000);
    assert_eq!(s.on_gpu(), 32_462_466_048);
    // optimizer offloaded: 2P + the two buckets + temp_grad_buffer_for_gpu_offload, one
    // largest parameter in bf16 (2 x 544,997,376 = 1,089,994,752):
    // 15,231,233,024 + 2,000,000,000 + 1,089,994,752 = 18,321,227,776 B = 17.06 GiB (was 2P,
    // 14.19 GiB: 2.88 GiB low)
    let off = full_finetuning_states(&a, &deepspeed(2, true), 7, 2, 8);
    assert_eq!(off.on_gpu(), 18_321_227_776);
}

#[test]
fn zero_3_keeps_a_bf16_gradient_partition_and_one_reduce_bucket() {
    let a = arch("Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(largest_layer_parameters(&a), EMBED);
    // 7 GPUs: 4 x largest = 2,179,989,504; params 2P/7 = 2,175,890,432; bf16 gradient
    // partition 2P/7 = 2,175,890,432; 12P/7 = 13,055,342,592; one bucket 1,000,000,000.
    // Sum 20,587,112,960 B = 19.17 GiB (fp32 partitions, no bucket: 21,763,003,392 B = 20.27)
    let s = full_finetuning_states(&a, &deepspeed(3, false), 7, 2, 8);
    assert_eq!(s.gradients, 2_175_890_432);
    assert_eq!(s.on_gpu(), 20_587_112_960);
}

#[test]
fn zero_3s_largest_layer_in_a_mixture_is_the_experts_module() {
    // Qwen3-30B-A3B: hidden 2,048, 128 experts of width 768. One layer's Qwen3MoeExperts holds
    // gate_up_proj 128 x 1,536 x 2,048 = 402,653,184 and down_proj 128 x 2,048 x 768 =
    // 201,326,592: 603,979,776 (model_to_params sums a module's own parameters). The largest
    // tensor, gate_up_proj, was taken before: 4 x 201,326,592 = 805,306,368 B = 0.75 GiB low.
    let a = arch("Qwen/Qwen3-30B-A3B");
    assert_eq!(largest_layer_parameters(&a), 603_979_776);
    // gpt-oss-20b: GptOssExperts holds gate_up_proj 32 x 2,880 x 5,760 = 530,841,600, its bias
    // 32 x 5,760 = 184,320, down_proj 32 x 2,880 x 2,880 = 265,420,800 and its bias
    // 32 x 2,880 = 92,160: 796,538,880, above the embedding's 201,088 x 2,880 = 579,133,440
    let g = arch("openai/gpt-oss-20b");
    assert_eq!(largest_layer_parameters(&g), 796_538_880);
}

#[test]
fn fsdp2_gathers_the_root_and_two_layers() {
    // Qwen2.5-7B: root = embedding + untied head + final norm = 2 x 544,997,376 + 3,584 =
    // 1,089,998,336, gathered in bf16 and kept: 2,179,996,672; a decoder layer 233,057,792
    // (frozen.rs' tests), the live one and the prefetched one in bf16: 4 x 233,057,792 =
    // 932,231,168. Sum 3,112,227,840 B = 2.90 GiB (4 x largest tensor said 2,179,989,504 B =
    // 2.03 GiB)
    let a = arch("Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(a.layer_parameters(), 233_057_792);
    assert_eq!(fsdp_gathered(&a, 3), 3_112_227_840);
    // SHARD_GRAD_OP keeps everything gathered: 2P
    assert_eq!(fsdp_gathered(&a, 2), 2 * P);
}

#[test]
fn trl_vllm_serve_takes_vllm_serves_batch_defaults() {
    // trl 1.15.0 build_command runs `vllm serve`; vllm 0.31.0 get_batch_defaults for
    // OPENAI_API_SERVER: >= 160 GiB (1024, 16384), >= 70 GiB (1024, 8192), else (256, 2048)
    use crate::units::GIB;
    let mut run = crate::run::RunConfig::example(arch("Qwen/Qwen2.5-7B-Instruct"));
    run.vllm_server.max_model_len = Some(4096);
    for (capacity, seqs, tokens) in [
        (180 * GIB, 1024, 16384),
        (80 * GIB, 1024, 8192),
        (48 * GIB, 256, 2048),
    ] {
        let plan = crate::memory::vllm::server_plan(&run, capacity);
        assert_eq!(
            (plan.max_num_seqs, plan.max_num_batched_tokens),
            (seqs, tokens)
        );
    }
}

#[test]
fn full_fine_tuning_s_fused_head_backward_holds_an_fp32_weight_gradient() {
    // One completion of 16 tokens after a 16-token prompt, TRL's fused head, no adapter.
    // ChunkedLogProbFunction: gathered hidden 16 x 3,584 x 2 = 114,688; a tile 16 x 32,768 x 2
    // = 1,048,576; backward = gathered + fp32 grad_hidden (2 x gathered) + its bf16 cast
    // (gathered) + tile = 1,507,328; plus grad_weight fp32 and its bf16 cast, 6 x 152,064 x
    // 3,584 = 3,269,984,256: 3,271,491,584 B at the head (2 bytes said 1,507,328).
    use crate::memory::step::{StepShape, trl_step};
    let a = arch("Qwen/Qwen2.5-7B-Instruct");
    let s = StepShape {
        seqs: 1,
        path: crate::memory::step::shape::StepPath::Harness,
        prompt: 16,
        completion: 16,
        rank: 16,
        fused_logits: true,
        ..crate::memory::step::shape::test_shape()
    };
    let full = trl_step(&a, &vec![false; a.projections().len()], &s);
    assert_eq!(full.logits, 3_271_491_584);
    // with LoRA the head's weight is frozen: no weight gradient, and the recomputed last layer
    // sets the peak, not the head
    let lora = trl_step(&a, &vec![true; a.projections().len()], &s);
    assert!(lora.logits + lora.activations < 3_269_984_256);
}
