//! Transformer architectures, known by the numbers of their `config.json`.

pub mod catalog;
pub mod config_json;

use serde::Serialize;

/// How a decoder layer's projections are laid out in the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Llama, Mistral: separate q/k/v/o and gate/up/down projections, two norms a layer.
    Llama,
    /// Qwen2 / Qwen2.5: as Llama, with biases on q/k/v.
    Qwen2,
    /// Qwen3: as Llama, with RMSNorm on each query and key head.
    Qwen3,
    /// Gemma 2: four norms a layer, final logit soft-capping.
    Gemma2,
    /// Gemma 3: four norms a layer, query/key norms, sliding-window layers.
    Gemma3,
    /// Phi-3 / Phi-4: fused `qkv_proj` and `gate_up_proj`.
    Phi3,
    /// gpt-oss: biases on every attention projection, one attention sink per head, experts
    /// and router with biases, alternating sliding-window layers.
    GptOss,
}

impl Family {
    pub fn norms_per_layer(self) -> u64 {
        match self {
            Family::Gemma2 | Family::Gemma3 => 4,
            _ => 2,
        }
    }
    pub fn has_qk_norm(self) -> bool {
        matches!(self, Family::Qwen3 | Family::Gemma3)
    }
    pub fn has_qkv_bias(self) -> bool {
        matches!(self, Family::Qwen2 | Family::GptOss)
    }
    pub fn fused_projections(self) -> bool {
        matches!(self, Family::Phi3)
    }
}

/// A mixture-of-experts MLP in every layer: each token goes to `active` of `experts` experts.
/// In transformers 5.x the experts are 3-D parameters of one module (`gate_up_proj` [experts,
/// 2 x width, hidden], `down_proj` [experts, hidden, width], e.g. `Qwen3MoeExperts`), not linear
/// layers: PEFT's `target_modules` cannot reach them, and bitsandbytes leaves them unquantised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Moe {
    pub experts: u64,
    pub active: u64,
    /// one expert's intermediate width (`moe_intermediate_size`, or `intermediate_size`)
    pub expert_intermediate: u64,
    /// the always-on shared expert's width (Qwen2-MoE), 0 without one
    pub shared_intermediate: u64,
    /// the checkpoint stores its experts in MXFP4 (`quantization_config.quant_method =
    /// "mxfp4"`, as openai/gpt-oss ships), which vLLM keeps packed
    pub mxfp4_experts: bool,
}

/// The numbers that decide memory: everything else in a config is irrelevant here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Arch {
    pub name: String,
    pub family: Family,
    pub hidden: u64,
    /// the MLP width a token's activations pass through: `intermediate_size` for a dense model,
    /// `active x expert width + shared width` for a mixture of experts
    pub intermediate: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    pub tied_embeddings: bool,
    /// Gemma 2's `final_logit_softcapping`: the logits pass through tanh, whose output autograd keeps.
    pub final_logit_softcapping: bool,
    /// Tokens a sliding-window layer attends to, and how many of the layers slide.
    pub sliding_window: Option<u64>,
    pub sliding_layers: u64,
    pub max_position: u64,
    pub moe: Option<Moe>,
    /// the vision tower a multimodal checkpoint loads beside its language model
    pub vision: Vision,
}

/// A multimodal checkpoint's vision tower. transformers 5.17's `AutoModelForCausalLM` maps a
/// `gemma3` config to `Gemma3ForConditionalGeneration` (auto/modeling_auto.py,
/// MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), and Unsloth's `FastModel` loads the same class: the tower
/// is resident on both stacks, frozen, in 16-bit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vision {
    /// a text-only model
    None,
    /// a SigLIP tower and its projector, counted: their parameters
    Counted(u64),
    /// a tower of a kind grpofit does not count yet (its `model_type`)
    Uncounted(String),
}

/// A SigLIP vision tower (transformers `SiglipVisionTransformer`) and Gemma 3's projector into a
/// language model of `text_hidden`: per layer q/k/v/o with biases, fc1/fc2 with biases, two
/// layer norms with biases; the patch convolution with its bias, one position embedding per
/// patch, the post layer norm; the projector's weight and its RMSNorm.
pub fn siglip_parameters(
    hidden: u64,
    intermediate: u64,
    layers: u64,
    patch: u64,
    image: u64,
    text_hidden: u64,
) -> u64 {
    let layer = 4 * (hidden * hidden + hidden)
        + 2 * hidden * intermediate
        + intermediate
        + hidden
        + 4 * hidden;
    let patches = (image / patch.max(1)).pow(2);
    let embeddings = 3 * patch * patch * hidden + hidden + patches * hidden;
    layers * layer + embeddings + 2 * hidden + hidden * text_hidden + hidden
}

/// A LoRA-targetable linear layer: its name in the checkpoint and its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    pub name: &'static str,
    pub fan_in: u64,
    pub fan_out: u64,
}

impl Arch {
    pub fn q_dim(&self) -> u64 {
        self.heads * self.head_dim
    }
    pub fn kv_dim(&self) -> u64 {
        self.kv_heads * self.head_dim
    }

    /// The linear layers of one decoder layer, as PEFT sees them.
    pub fn projections(&self) -> Vec<Projection> {
        let (h, i) = (self.hidden, self.linear_mlp_width());
        let p = |name, fan_in, fan_out| Projection {
            name,
            fan_in,
            fan_out,
        };
        if self.family.fused_projections() {
            vec![
                p("qkv_proj", h, self.q_dim() + 2 * self.kv_dim()),
                p("o_proj", self.q_dim(), h),
                p("gate_up_proj", h, 2 * i),
                p("down_proj", i, h),
            ]
        } else {
            let mut v = vec![
                p("q_proj", h, self.q_dim()),
                p("k_proj", h, self.kv_dim()),
                p("v_proj", h, self.kv_dim()),
                p("o_proj", self.q_dim(), h),
            ];
            if i > 0 {
                v.extend([
                    p("gate_proj", h, i),
                    p("up_proj", h, i),
                    p("down_proj", i, h),
                ]);
            }
            v
        }
    }

    /// The width of the MLP's linear layers: the dense MLP, or a mixture's shared expert (0
    /// when it has none: its experts are not linear layers).
    fn linear_mlp_width(&self) -> u64 {
        self.moe
            .map_or(self.intermediate, |m| m.shared_intermediate)
    }

    /// One layer's expert parameters, beside its linear layers: the experts' `gate_up_proj` and
    /// `down_proj` (quantisable as fp8 only), then the router (and gpt-oss's biases, Qwen2-MoE's
    /// shared-expert gate).
    pub fn expert_tensors(&self) -> Vec<u64> {
        let Some(m) = self.moe else {
            return Vec::new();
        };
        let (h, e, i) = (self.hidden, m.experts, m.expert_intermediate);
        let mut t = vec![e * 2 * i * h, e * h * i, e * h];
        if self.family == Family::GptOss {
            t.extend([e * 2 * i, e * h, e]);
        }
        if m.shared_intermediate > 0 {
            t.push(h);
        }
        t
    }

    /// The experts module's own parameters in one layer (transformers 5's `Qwen3MoeExperts`,
    /// `GptOssExperts`: `gate_up_proj`, `down_proj` and, for gpt-oss, their biases), the router
    /// being a module of its own. 0 for a dense model.
    pub fn expert_module_parameters(&self) -> u64 {
        let t = self.expert_tensors();
        match (self.moe, self.family) {
            (None, _) => 0,
            // [gate_up, down, router, gate_up bias, down bias, router bias]
            (Some(_), Family::GptOss) => t[0] + t[1] + t[3] + t[4],
            (Some(_), _) => t[0] + t[1],
        }
    }

    /// One decoder layer's parameters: the unit FSDP wraps (accelerate's transformer-based
    /// auto-wrap policy on the model's `_no_split_modules`).
    pub fn layer_parameters(&self) -> u64 {
        self.layer_tensors().iter().sum()
    }

    /// Every parameter tensor's element count, in the order the model allocates them.
    pub fn parameter_tensors(&self) -> impl Iterator<Item = u64> + '_ {
        let embed = std::iter::once(self.vocab * self.hidden);
        let per_layer = self.layer_tensors();
        let layers = (0..self.layers).flat_map(move |_| per_layer.clone());
        let head = (!self.tied_embeddings).then_some(self.vocab * self.hidden);
        let vision = match self.vision {
            Vision::Counted(p) => Some(p),
            _ => None,
        };
        embed
            .chain(layers)
            .chain(std::iter::once(self.hidden))
            .chain(head)
            .chain(vision)
    }

    fn layer_tensors(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self
            .projections()
            .iter()
            .map(|p| p.fan_in * p.fan_out)
            .collect();
        t.extend(self.layer_vectors());
        t.extend(self.expert_tensors());
        t
    }

    /// One layer's parameters other than its projections: q/k/v biases and norm weights.
    pub fn layer_vectors(&self) -> Vec<u64> {
        let mut t = Vec::new();
        if self.family.has_qkv_bias() {
            t.extend([self.q_dim(), self.kv_dim(), self.kv_dim()]);
        }
        t.extend(std::iter::repeat_n(
            self.hidden,
            self.family.norms_per_layer() as usize,
        ));
        if self.family.has_qk_norm() {
            t.extend([self.head_dim, self.head_dim]);
        }
        if self.family == Family::GptOss {
            // o_proj's bias and one attention sink per head
            t.extend([self.hidden, self.heads]);
        }
        t
    }

    /// Exact parameter count (embeddings counted once when tied).
    pub fn parameters(&self) -> u64 {
        self.parameter_tensors().sum()
    }

    /// KV cache bytes one sequence of `tokens` needs, sliding-window layers capped at their window.
    pub fn kv_bytes_for(&self, tokens: u64) -> u64 {
        let per_layer = 2 * self.kv_dim() * 2;
        let full = self.layers - self.sliding_layers;
        let window = self.sliding_window.map_or(tokens, |w| w.min(tokens));
        per_layer * (full * tokens + self.sliding_layers * window)
    }
}
