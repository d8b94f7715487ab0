"""Model sweep: every Transformers architecture that can be built offline from a small config, run on
tpu against CPU PyTorch (forward, loss, every gradient, greedy `generate`; `--compile` adds
torch.compile(backend="tpu")), one subprocess per model. Writes docs/model_coverage.md.

    python tools/models.py --out docs/model_coverage.md          # the full sweep (make models, ~2 h)
    python tools/models.py --slice                               # 8 diverse models (CI)
    python tools/models.py --models gpt2,llama --compile         # a subset, also compiled
    python tools/models.py --list                                # what would run (model type, class)
    python tools/models.py --report-only --out docs/model_coverage.md   # rewrite from --results

Each model type is taken once, with the first head it has among: seq2seq LM, speech seq2seq, masked LM,
causal LM, CTC, audio classification, image classification (timm is not swept: it needs torchvision).
Its default config is shrunk generically (hidden 64, 2 layers keeping two kinds of layer where the
model mixes them, 4 heads, 4 experts top-2, vocab 128, image 32, ...; sizes equal in the default stay
equal), with a few per-model OVERRIDES where the default config is inconsistent once shrunk. The model
is built on CPU with a fixed seed, deep-copied to tpu, and both run the same random inputs in eval mode
(no dropout); the first input layout the CPU model accepts is used. The loss is the model's own (with
labels) where the CPU accepts labels, else the sum of its float outputs times a fixed random projection.

Statuses: pass; numerics-fail (ran, but a check below failed); crash (an exception or a signal on tpu,
or more than --max-memory-gb); timeout; not-instantiable-offline (the config or model cannot be built
here: missing package, default config that Transformers itself cannot build, ...) and
cpu-reference-failed (the CPU run itself fails on the sweep's inputs) are listed but left out of the
totals.

Checks (tolerances of the issue): causal LM: |ppl_tpu - ppl_cpu| / ppl_cpu <= 0.10 with ppl = exp(loss);
every float output: relative MSE (mse / mean(cpu^2)) <= 0.10 or MSE < 0.05; every gradient: relative
MSE <= 0.10 (denominator floored at 1e-6 of the model's mean square gradient: gradients that are zero
in theory); generate: the same tokens as CPU. The report also shows the worst measured values, which
are usually ~1e-13, far below the tolerances.

Compile counts come from torch_tpu.metrics.counters()["compiles"] in the model's process, with the
persistent compile cache off (TORCH_TPU_CACHE=0; --disk-cache turns it on).
"""
import argparse
import copy
import datetime
import inspect
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Which head to build for each model type: the first mapping (in this order) that names the type.
TASKS = [
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
]
GENERATIVE = {"seq2seq-lm", "speech-seq2seq", "causal-lm"}
SLICE = ["gpt2", "llama", "bert", "t5", "mixtral", "qwen2_moe", "wav2vec2", "vit"]

BATCH, SEQ, VOCAB, INPUT_VOCAB = 2, 16, 128, 100  # token inputs avoid the special ids placed above 100
HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 64, 128, 4, 2, 16, 2
MAX_ELEMENTS = 300_000_000  # parameters + buffers of a shrunk model (the memory watchdog is the backstop)
TOLERANCE = 0.10  # relative perplexity difference, relative MSE
ABS_MSE = 0.05

# Config attributes set to a small value when the default is larger (or differs, for heads).
SMALL = {
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim", "model_dim",
                     "word_embed_proj_dim", "d_embed", "n_embed", "projection_dim", "proj_size",
                     "output_hidden_size", "classifier_proj_size", "text_embed_dim", "vision_embed_dim",
                     "embedding_dim", "cross_attention_hidden_size", "emb_dim", "d_latents"], HIDDEN),
    **dict.fromkeys(["entity_vocab_size"], VOCAB),
    **dict.fromkeys(["num_latents"], 32),
    **dict.fromkeys(["embedding_size"], 32),
    **dict.fromkeys(["intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff",
                     "ffn_hidden_size", "intermediate_size_mlp", "d_inner", "hidden_act_dim", "mlp_dim",
                     "dense_intermediate_size"], FFN),
    **dict.fromkeys(["moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size",
                     "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "expert_dim"], 32),
    **dict.fromkeys(["num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers",
                     "num_decoder_layers", "num_encoder_layers", "decoder_num_layers", "num_text_layers"], LAYERS),
    **dict.fromkeys(["num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads",
                     "num_heads", "n_heads", "decoder_num_attention_heads"], HEADS),
    **dict.fromkeys(["head_dim", "attention_head_dim", "qk_nope_head_dim", "v_head_dim", "kv_lora_rank",
                     "q_lora_rank", "attention_head_size", "d_kv", "linear_key_head_dim",
                     "linear_value_head_dim"], HEAD_DIM),
    **dict.fromkeys(["qk_rope_head_dim", "rotary_dim"], 8),
    **dict.fromkeys(["num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"], 4),
    **dict.fromkeys(["num_experts_per_tok", "moe_topk", "num_selected_experts", "moe_k", "top_k"], 2),
    **dict.fromkeys(["n_shared_experts", "num_shared_experts", "n_group", "topk_group"], 1),
    **dict.fromkeys(["vocab_size", "vocab_size_per_layer_input"], VOCAB),
    **dict.fromkeys(["hidden_size_per_layer_input"], 16),
    **dict.fromkeys(["num_kv_shared_layers"], 0),
    **dict.fromkeys(["max_position_embeddings", "n_positions", "max_target_positions", "n_ctx",
                     "max_sequence_length", "max_seq_len"], 256),
    **dict.fromkeys(["image_size", "img_size"], 32),
    **dict.fromkeys(["patch_size"], 8),
    **dict.fromkeys(["num_conv_pos_embeddings"], 16),
    **dict.fromkeys(["num_conv_pos_embedding_groups"], 4),
    **dict.fromkeys(["max_source_positions"], 32),
    **dict.fromkeys(["sliding_window", "attention_window", "window_size_attn"], 8),
    **dict.fromkeys(["linear_num_key_heads", "linear_num_value_heads", "num_linear_heads"], 2),
    **dict.fromkeys(["state_size", "ssm_state_size", "mamba_d_state", "d_state"], 16),
    **dict.fromkeys(["mamba_n_heads", "mamba_num_heads"], 4),
    **dict.fromkeys(["mamba_head_dim", "mamba_d_head"], 16),
    **dict.fromkeys(["time_step_rank", "mamba_dt_rank"], 8),
    **dict.fromkeys(["n_groups", "mamba_n_groups", "num_expert_group"], 1),
    **dict.fromkeys(["num_experts_per_token"], 2),
    **dict.fromkeys(["linear_num_heads"], 4),
    **dict.fromkeys(["linear_head_dim"], 16),
    **dict.fromkeys(["type_vocab_size"], 2),
    **dict.fromkeys(["first_k_dense_replace"], 1),
}
KV_NAMES = ["num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_kv_heads", "num_key_value_groups"]
LAYER_NAMES = ["num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers"]

# Per model type: config values that the generic shrink gets wrong (applied after it; "vision_config.x"
# reaches a sub-config).
OVERRIDES = {
    "wav2vec2": {"conv_dim": [16, 16], "conv_stride": [5, 2], "conv_kernel": [10, 3]},
    "esm": {"pad_token_id": 1, "mask_token_id": 2},
    "bamba": {"attn_layer_indices": [1]},
    "mobilebert": {"true_hidden_size": 32, "intra_bottleneck_size": 32, "embedding_size": 32},
    "bit": {"num_groups": 4},
    "hgnet_v2": {"hidden_sizes": [128, 512, 1024, 2048]},  # the head reads hidden_sizes[-1] == stage_out_channels[-1]
    "efficientnet": {"width_coefficient": 0.25, "depth_coefficient": 0.5, "hidden_dim": 320},
    "levit": {"image_size": 64, "patch_size": 16, "hidden_sizes": [32, 64, 96], "num_attention_heads": [2, 2, 2],
              "key_dim": [8, 8, 8], "down_ops": [["Subsample", 8, 4, 4, 2, 2], ["Subsample", 8, 8, 4, 2, 2]]},
    "audio-spectrogram-transformer": {"max_length": 64},
    "mobilevitv2": {"image_size": 64},
    "mobilevit": {"image_size": 64},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"], "lru_width": 64, "attention_window_size": 8},
    "blt": {"encoder_hash_byte_group_vocab": 256},
    "xlstm": {"num_blocks": 2, "qk_dim_factor": 1.0},  # (0.5: the native step kernel refuses its own state)
    "dots3_note_text": {"head_dim": 32},  # partial_rotary_factor 0.25 x head_dim == qk_rope_head_dim
    "dots3_note": {"text_config.head_dim": 32},
    "dbrx": {"attn_config.rope_theta": 10000.0, "attn_config.clip_qkv": 8.0},
    "cohere_compass_text": {"rope_parameters": {t: {"rope_type": "default", "rope_theta": 10000.0}
                                                for t in ("full_attention", "sliding_attention")}},
    "zamba2": {"attention_head_dim": 32, "mamba_headdim": 16, "n_mamba_heads": 8},
    "zamba": {"num_hidden_layers": 4, "attention_head_dim": 32,  # two hybrid layers share one transformer
              "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]},
    # Reformer's backward needs train mode; LSH attention draws random rotations (device RNG): local only
    "reformer": {"axial_pos_embds_dim": [32, 32], "axial_pos_shape": [4, 4], "attn_layers": ["local", "local"],
                 "hidden_dropout_prob": 0.0, "local_attention_probs_dropout_prob": 0.0,
                 "lsh_attn_chunk_length": 16, "local_attn_chunk_length": 16, "num_buckets": 4,
                 "feed_forward_size": 128},
}

# Model types whose backward needs train mode (dropout set to 0 above instead of eval mode).
TRAIN_MODE = {"reformer"}

# Per model type: set-up a real checkpoint or pipeline would do after building the model.
POST_BUILD = {
    "xmod": lambda model: model.set_default_language("en_XX"),
}


# ------------------------------------------------------------------------------------------------
# The catalog: model type -> (task, class name)

def catalog():
    from transformers.models.auto import modeling_auto
    seen = {}
    for task, mapping in TASKS:
        for model_type, cls in getattr(modeling_auto, mapping).items():
            if model_type not in seen:
                seen[model_type] = (task, cls if isinstance(cls, str) else cls[0])
    return seen


# ------------------------------------------------------------------------------------------------
# Shrinking a config

def _small_value(key, value, orig_heads):
    if key in KV_NAMES and value is None:
        return HEADS
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if key in KV_NAMES:
        if orig_heads and value >= orig_heads:
            return HEADS
        return 1 if value == 1 else KV_HEADS
    if key in SMALL:
        small = SMALL[key]
        if key in ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads",
                   "num_heads", "n_heads", "decoder_num_attention_heads"):
            return small if value != small else None
        return small if value > small else None
    if key.endswith(("_token_id", "_token_index", "_id")) and key not in ("model_id",) and value >= VOCAB:
        return None  # renumbered below (distinct ids above INPUT_VOCAB)
    return None


def _two_kinds(per_layer):
    """A per-layer list cut to LAYERS entries that keeps a second kind of layer where there is one
    (sliding + full attention, dense + sparse MLP, mamba + attention)."""
    other = next((v for v in per_layer if v != per_layer[0]), None)
    if other is None:
        return per_layer[:LAYERS]
    return per_layer[:LAYERS - 1] + [other]


def shrink(config):
    """{attribute: small value} for a config (sub-configs as full dicts, themselves shrunk)."""
    from transformers import PretrainedConfig
    d = config.to_dict()
    orig_heads = next((d[k] for k in ("num_attention_heads", "n_head", "num_heads") if isinstance(d.get(k), int)),
                      None)
    orig_layers = next((d[k] for k in LAYER_NAMES if isinstance(d.get(k), int) and d[k] > LAYERS), None)
    out = {}
    next_special = VOCAB - 1
    for key, value in d.items():
        try:
            sub = getattr(config, key, None)
        except Exception:  # per-layer attributes of heterogeneous configs refuse a global read
            sub = None
        if isinstance(sub, dict) and isinstance(sub.get("model_type"), str):  # a sub-config kept as a dict
            from transformers import CONFIG_MAPPING
            try:
                sub = CONFIG_MAPPING[sub["model_type"]](**{k: v for k, v in sub.items() if k != "model_type"})
            except Exception:
                sub = None
        if isinstance(sub, PretrainedConfig):
            full = sub.to_dict()
            full.update(shrink(sub))
            out[key] = full
            continue
        new = _small_value(key, value, orig_heads)
        if key == "vocab_size" and value is None:
            new = VOCAB
        elif key == "head_dim" and value is None and isinstance(d.get("num_attention_heads"), int):
            new = HIDDEN // HEADS  # derived from hidden / heads by most models; a few read it unset
        elif new is None and key.endswith("hidden_size") and isinstance(value, int) and value > HIDDEN:
            main_hidden = d.get("hidden_size")  # audio_hidden_size, attention_hidden_size, ...: same ratio
            new = value * HIDDEN // main_hidden if isinstance(main_hidden, int) and value % main_hidden == 0 else HIDDEN
        elif key.endswith("_layer_period") and isinstance(value, int) and value > 2:
            new = 2  # jamba, zamba: attention / experts every other layer
        elif key.endswith("_layer_offset") and isinstance(value, int) and value > 1:
            new = 1
        if new is not None:
            out[key] = new
        elif (key.endswith(("_token_id", "_token_index")) and isinstance(value, int) and not isinstance(value, bool)
              and value >= INPUT_VOCAB):
            out[key] = next_special
            next_special -= 1
        elif (key.endswith(("_token_id",)) and isinstance(value, list) and value
              and all(isinstance(v, int) and v >= INPUT_VOCAB for v in value)):
            out[key] = list(range(next_special, next_special - len(value), -1))
            next_special -= len(value)
        elif key in ("num_heads", "num_attention_heads") and isinstance(value, (list, tuple)):
            out[key] = [1] * len(value)  # per-stage heads (Swin, CvT, ...)
        elif key in SMALL and isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            out[key] = [min(v, SMALL[key]) for v in (_two_kinds(list(value)) if len(value) == orig_layers else value)]
        elif isinstance(value, (list, tuple)) and orig_layers and len(value) == orig_layers:
            out[key] = _two_kinds(list(value))  # per-layer lists (layer_types, block types, ...)
        elif isinstance(value, str) and orig_layers and len(value) == orig_layers and key.endswith("pattern"):
            out[key] = "".join(_two_kinds(list(value)))
        elif key == "per_layer_config" and isinstance(value, dict):  # heterogeneous configs: layer -> values
            out[key] = {k: v for k, v in value.items() if str(k).isdigit() and int(k) < LAYERS}
        elif key in ("depths",) and isinstance(value, (list, tuple)):
            out[key] = [1] * len(value)
        elif key in ("hidden_sizes", "embed_dims", "embedding_dims", "neck_hidden_sizes") and isinstance(value, (list, tuple)):
            out[key] = [16 * (i + 1) for i in range(len(value))]
        elif key in ("conv_dim",) and isinstance(value, (list, tuple)):
            out[key] = [16] * len(value)
        elif key == "tdnn_dim" and isinstance(value, (list, tuple)):
            out[key] = [16] * len(value)
        elif key == "xvector_output_dim" and isinstance(value, int):
            out[key] = 16
        elif key in ("rope_parameters", "rope_scaling") and isinstance(value, dict) and "mrope_section" in value:
            head_dim = out.get("head_dim", HEAD_DIM) if "head_dim" in d else HIDDEN // HEADS
            half = head_dim // 2
            sec = value["mrope_section"]
            new_sec = [max(1, half * s // sum(sec)) for s in sec]
            new_sec[0] += half - sum(new_sec)
            out[key] = dict(value, mrope_section=new_sec)
    # Sizes equal in the default config stay equal (embedding_size == hidden_size, head_dim ==
    # qk_rope_head_dim, ...): the first anchor with the same default value sets the shrunk value.
    for anchor in ("hidden_size", "d_model", "n_embd", "qk_rope_head_dim"):
        if anchor in out and isinstance(d.get(anchor), int):
            for key in list(out):
                if key != anchor and key in SMALL and d.get(key) == d[anchor] and SMALL[key] != out[anchor] \
                        and key not in ("vocab_size",) and not key.endswith(("_layers", "_heads", "layer")) \
                        and not any(w in key for w in ("position", "ctx", "seq", "window", "len")) \
                        and any(w in key for w in ("dim", "size", "hidden")):
                    out[key] = out[anchor]
            for key, value in d.items():  # e.g. upsample_groups == hidden_size
                if key not in out and value == d[anchor] and isinstance(value, int) and not isinstance(value, bool) \
                        and value > 16 and any(w in key for w in ("group", "size", "dim")):
                    out[key] = out[anchor]
    # Mamba-2 blocks: heads x head_dim == expand x hidden_size, as in the default config
    hidden_key = next((k for k in ("hidden_size", "d_model") if isinstance(d.get(k), int)), None)
    for e in ("mamba_expand", "expand"):
        for h in ("mamba_n_heads", "mamba_num_heads", "n_mamba_heads", "num_heads"):
            for hd in ("mamba_d_head", "mamba_head_dim", "mamba_headdim", "head_dim"):
                if hidden_key and all(isinstance(d.get(k), int) for k in (e, h, hd)) and \
                        d[e] * d[hidden_key] == d[h] * d[hd]:
                    new_hd = out.get(hd, d[hd])
                    out[h] = max(1, d[e] * out.get(hidden_key, d[hidden_key]) // new_hd)
    if isinstance(d.get("window_size"), int) and "depths" in d:  # Swin-like: windows fit 8x8 patches
        out["window_size"] = 2
        out["patch_size"] = 4
    # MoE defaults left unset (None) in some configs: 4 experts, top-2
    expert_keys = [k for k in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts") if k in d]
    topk_keys = [k for k in ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "moe_k") if k in d]
    if expert_keys and topk_keys:
        for k in expert_keys:
            if d[k] is None:
                out[k] = 4
        for k in topk_keys:
            if d[k] is None:
                out[k] = 2
        for k in ("n_shared_experts", "num_shared_experts"):
            if k in d and d[k] is None:
                out[k] = 1
    if isinstance(d.get("qk_head_dim"), int) and "qk_nope_head_dim" in out and "qk_rope_head_dim" in out:
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    return out


def small_config(model_type):
    from transformers import CONFIG_MAPPING
    config_class = CONFIG_MAPPING[model_type]
    default = config_class()
    overrides = shrink(default)
    for key, value in OVERRIDES.get(model_type, {}).items():
        if "." in key:
            outer, inner = key.split(".", 1)
            overrides.setdefault(outer, getattr(default, outer).to_dict())[inner] = value
        else:
            overrides[key] = value
    try:
        cfg = config_class(**overrides)
    except Exception:  # some configs refuse a derived value passed back: set the attributes instead
        cfg = config_class()
        for key, value in overrides.items():
            try:
                current = getattr(cfg, key, None)
                if isinstance(value, dict) and hasattr(current, "to_dict"):
                    value = type(current)(**value)
                setattr(cfg, key, value)
            except Exception:
                pass
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "decoder_start_token_id", None) is None:
        cfg.decoder_start_token_id = getattr(cfg, "pad_token_id", None) or 0  # set by real checkpoints
    return cfg


def build(model_type, task, cls_name):
    import torch
    import transformers
    cfg = small_config(model_type)
    cls = getattr(transformers, cls_name)
    wanted = getattr(cls, "config_class", None)
    for sub in ("text_config", "decoder_config", "decoder"):  # a composite type mapped to a text-only head
        if wanted is not None and not isinstance(cfg, wanted) and isinstance(getattr(cfg, sub, None), wanted):
            cfg = getattr(cfg, sub)
            break
    try:  # size check without allocating: a config the shrink missed could fill the machine's memory
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            probe = cls(cfg)
            size = sum(t.numel() for t in (*probe.parameters(), *probe.buffers()))
            del probe
    except Exception:
        size = 0  # (some models cannot be built on the meta device; the memory watchdog still applies)
    if size > MAX_ELEMENTS:
        raise RuntimeError(f"the shrunk config still has {size / 1e6:.0f}M parameter and buffer elements "
                           f"(limit {MAX_ELEMENTS / 1e6:.0f}M): the generic shrink does not reach this config")
    for attempt in range(4):
        torch.manual_seed(0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = cls(cfg)
            break
        except AttributeError as e:  # a default config lacking an attribute its model reads: add it
            name = str(e).rsplit("'", 2)[-2] if str(e).count("'") >= 4 and "Config" in str(e) else None
            if attempt == 3 or name is None:
                raise
            if name in KV_NAMES:
                setattr(cfg, name, _find(cfg, "num_attention_heads", default=HEADS))
            elif name in SMALL:
                setattr(cfg, name, SMALL[name])
            elif name.endswith("_token_id"):
                setattr(cfg, name, 0)
            else:
                raise
    if model_type in POST_BUILD:
        POST_BUILD[model_type](model)
    # Matrices initialised to a constant (zero-initialised routers, ...) get small random values: routing
    # scores that tie exactly would be ordered by each top-k implementation's own rule (unspecified).
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.numel() > 1 and p.is_floating_point() and bool((p == p.flatten()[0]).all()):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    model = model.float().eval()
    if model_type in TRAIN_MODE:  # (its dropout probabilities are set to 0 in OVERRIDES)
        model.train()
    return model, cfg


# ------------------------------------------------------------------------------------------------
# Inputs

def _find(cfg, *names, default=None):
    for source in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "decoder_config", None),
                   getattr(cfg, "audio_config", None), getattr(cfg, "encoder_config", None),
                   getattr(cfg, "vision_config", None), getattr(cfg, "encoder", None)):
        if source is None:
            continue
        for n in names:
            v = getattr(source, n, None)
            if v is not None:
                return v
    return default


def make_inputs(model, cfg, task, model_type=None):
    """Candidate {name: CPU tensor} dicts for the model's forward, labels included where the task has
    them; the first one the CPU model runs is used (input layouts differ between audio models)."""
    import torch
    g = torch.Generator().manual_seed(1)
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    vocab = _find(cfg, "vocab_size", default=VOCAB)
    high = max(4, min(INPUT_VOCAB, vocab if isinstance(vocab, int) else VOCAB))
    ids = torch.randint(3, high, (BATCH, SEQ), generator=g)
    labels8 = torch.randint(3, high, (BATCH, 8), generator=g)
    decoder8 = torch.randint(3, high, (BATCH, 8), generator=g)
    num_labels = getattr(cfg, "num_labels", 2)
    class_labels = torch.randint(0, num_labels, (BATCH,), generator=g)
    ctc_labels = torch.randint(3, high, (BATCH, 4), generator=g)
    candidates = []
    if main == "input_ids" or task in ("causal-lm", "masked-lm"):
        base = {"input_ids": ids}
        if "attention_mask" in params:
            base["attention_mask"] = torch.ones_like(ids)
        candidates.append(base)
    elif main == "pixel_values":
        size = _find(cfg, "image_size", default=32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = _find(cfg, "num_channels", default=3)
        candidates.append({"pixel_values": torch.randn(BATCH, channels, size, size, generator=g)})
    elif main in ("input_values", "inputs"):
        candidates.append({main: torch.randn(BATCH, 4000, generator=g)})
        mel, length = _find(cfg, "num_mel_bins"), _find(cfg, "max_length")
        if isinstance(mel, int) and isinstance(length, int):  # spectrogram transformers: (batch, time, mel)
            candidates.append({main: torch.randn(BATCH, length, mel, generator=g)})
    elif main == "input_features":
        mels = []
        for names in (("num_mel_bins",), ("feature_size",), ("input_feat_per_channel",)):
            m = _find(cfg, *names)
            if isinstance(m, int) and m not in mels:
                mels.append(m * (getattr(cfg, "input_channels", 1) if names[0] == "input_feat_per_channel" else 1))
        mels = mels or [80]
        mels += [k * m for k in (2, 4) for m in mels if k * m not in mels]  # stacked frames (w2v-BERT, ...)
        src = _find(cfg, "max_source_positions")
        frames = 2 * src if isinstance(src, int) else 64
        for mel in mels:
            for shape in ((BATCH, mel, frames), (BATCH, frames, mel)):
                x = {"input_features": torch.randn(*shape, generator=g)}
                if "attention_mask" in params:
                    candidates.append(dict(x, attention_mask=torch.ones(BATCH, shape[1] if shape[2] == mel else shape[2],
                                                                        dtype=torch.long)))
                candidates.append(x)
    else:
        raise RuntimeError(f"no input recipe for main input {main!r}")
    out = []
    for c in candidates:
        if task in ("causal-lm", "masked-lm"):
            c["labels"] = ids.clone()
        elif task in ("seq2seq-lm", "speech-seq2seq"):
            if "decoder_input_ids" in params:
                c["decoder_input_ids"] = decoder8
            c["labels"] = labels8
        elif task in ("image-classification", "audio-classification"):
            c["labels"] = class_labels
        elif task == "ctc":
            c["labels"] = ctc_labels
        fix = INPUT_FIXES.get(model_type or model.config.model_type)
        if fix:
            c = fix(c, cfg, g)
        out.append(c)
    return out


def _dia_inputs(c, cfg, g):
    import torch
    channels = cfg.decoder_config.num_channels  # audio codes: (batch, frames, channels)
    c["decoder_input_ids"] = torch.randint(3, 100, (BATCH, 8, channels), generator=g)
    c.pop("labels", None)
    return c


def _musicgen_inputs(c, cfg, g):
    import torch
    codebooks = getattr(cfg, "num_codebooks", None) or cfg.decoder.num_codebooks
    # the decoder's input ids are (batch x codebooks, frames)
    key = "decoder_input_ids" if "decoder_input_ids" in c else "input_ids"
    c[key] = torch.randint(3, 100, (BATCH * codebooks, 8), generator=g)
    c.pop("attention_mask", None)
    c.pop("labels", None)
    return c


# Per model type: input changes the generic recipe cannot guess.
INPUT_FIXES = {"dia": _dia_inputs, "musicgen": _musicgen_inputs, "musicgen_melody": _musicgen_inputs}


# ------------------------------------------------------------------------------------------------
# Running and comparing

def float_leaves(out, prefix="out"):
    """[(name, tensor)] of the floating-point tensors in a model output (caches left out)."""
    import torch
    if isinstance(out, torch.Tensor):
        return [(prefix, out)] if out.is_floating_point() else []
    if hasattr(out, "items") and not hasattr(out, "get_seq_length"):
        res = []
        for k, v in out.items():
            if k in ("past_key_values", "cache_params", "mems", "past_buckets_states"):
                continue
            res += float_leaves(v, f"{k}" if prefix == "out" else f"{prefix}.{k}")
        return res
    if isinstance(out, (tuple, list)):
        res = []
        for i, v in enumerate(out):
            res += float_leaves(v, f"{prefix}[{i}]")
        return res
    return []


def projection_loss(out):
    import torch
    g = torch.Generator().manual_seed(2)
    total = None
    for _, t in float_leaves(out):
        proj = torch.randn(t.shape, generator=g).to(t.device, t.dtype)
        term = (t * proj).sum()
        total = term if total is None else total + term
    if total is None:
        raise RuntimeError("the model returned no floating-point output")
    return total


def to(inputs, device):
    return {k: v.to(device) for k, v in inputs.items()}


def rel_mse(got, want):
    got, want = got.detach().cpu().double(), want.detach().double()
    if got.shape != want.shape:
        return math.inf, math.inf
    mse = ((got - want) ** 2).mean().item() if want.numel() else 0.0
    ms = (want ** 2).mean().item() if want.numel() else 0.0
    if not math.isfinite(mse):
        return math.inf, math.inf
    return (mse / ms if ms > 0 else (0.0 if mse == 0 else math.inf)), mse


def compare_outputs(got, want):
    """(ok, worst relative MSE, name of the worst)"""
    worst, worst_name, ok = 0.0, "", True
    g, w = dict(float_leaves(got)), dict(float_leaves(want))
    for name, t in w.items():
        if name not in g:
            return False, math.inf, f"{name} missing on tpu"
        rel, mse = rel_mse(g[name], t)
        nan_same = bool(((g[name].detach().cpu().isnan()) == t.isnan()).all()) if g[name].shape == t.shape else False
        if rel > worst:
            worst, worst_name = rel, name
        if not (rel <= TOLERANCE or mse < ABS_MSE) and not (nan_same and t.isnan().any()):
            ok = False
    return ok, worst, worst_name


def compare_grads(tpu_model, cpu_model):
    import torch
    pairs = list(zip(tpu_model.named_parameters(), cpu_model.parameters()))
    squares = [(q.grad.double() ** 2).mean().item() for _, q in pairs if q.grad is not None and q.grad.numel()]
    floor = 1e-6 * (sum(squares) / len(squares)) if squares else 0.0
    worst, worst_name, ok = 0.0, "", True
    for (name, p), q in pairs:
        if (p.grad is None) != (q.grad is None):
            return False, math.inf, f"{name}: gradient is {'missing' if p.grad is None else 'unexpected'} on tpu"
        if q.grad is None or not q.grad.numel():
            continue
        got, want = p.grad.detach().cpu().double(), q.grad.double()
        mse = ((got - want) ** 2).mean().item()
        rel = mse / max((want ** 2).mean().item(), floor) if (mse or floor) else 0.0
        if not math.isfinite(rel):
            rel = math.inf
        if rel > worst:
            worst, worst_name = rel, name
        if not rel <= TOLERANCE:
            ok = False
    return ok, worst, worst_name


def first_line(e):
    """The exception's first line, and its innermost cause's (Dynamo wraps the real error)."""
    def line(x):
        msg = str(x).strip().splitlines()
        return f"{type(x).__name__}: {msg[0] if msg else ''}"
    text = line(e)
    cause, seen = e, {id(e)}
    while (cause.__cause__ or cause.__context__) is not None and id(cause.__cause__ or cause.__context__) not in seen:
        cause = cause.__cause__ or cause.__context__
        seen.add(id(cause))
    if cause is not e and line(cause) != text:
        text += f" (cause: {line(cause)})"
    return text[:400]


def where(e):
    """The innermost frame of the traceback outside torch/ (where the model called the failing op)."""
    tb = traceback.extract_tb(e.__traceback__)
    for frame in reversed(tb):
        if "/torch/" not in frame.filename:
            path = frame.filename
            for marker in ("site-packages/", ROOT + "/"):
                if marker in path:
                    path = path.split(marker, 1)[1]
            return f"{path}:{frame.lineno}"
    return ""


def run_forward(model, inputs, use_labels):
    kwargs = dict(inputs)
    if not use_labels:
        kwargs.pop("labels", None)
    return model(**kwargs)


def loss_of(out, use_labels):
    if use_labels:
        return out.loss
    return projection_loss(out)


def generate_kwargs(task, inputs, cfg):
    kw = {"max_new_tokens": 4, "do_sample": False, "num_beams": 1}
    if task == "causal-lm":
        kw["input_ids"] = inputs["input_ids"][:1, :8]
        kw["attention_mask"] = torch_ones_like(kw["input_ids"])
    elif task == "seq2seq-lm":
        kw["input_ids"] = inputs["input_ids"][:1]
        kw["attention_mask"] = torch_ones_like(kw["input_ids"])
    elif task == "speech-seq2seq":
        kw["input_features"] = inputs["input_features"][:1]
        if "attention_mask" in inputs:
            kw["attention_mask"] = inputs["attention_mask"][:1]
    pad = _find(cfg, "pad_token_id")
    if pad is None:
        pad = _find(cfg, "eos_token_id")
    if isinstance(pad, list):
        pad = pad[0]
    if pad is not None:
        kw["pad_token_id"] = pad
    return kw


def torch_ones_like(t):
    import torch
    return torch.ones_like(t)


def worker(model_type, task, cls_name, mode, do_compile, result_path):
    """Runs one model (in its own process); writes the result dict as JSON to result_path."""
    import torch
    import torch_tpu

    result = {"model": model_type, "task": task, "class": cls_name, "status": None, "error": "", "stage": ""}

    def save():
        with open(result_path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(result_path + ".tmp", result_path)

    def at(stage):  # progress, for a process that is killed (timeout, memory) or dies
        result["progress"] = stage
        save()
        return stage

    start = time.time()
    at("build")
    try:
        cpu_model, cfg = build(model_type, task, cls_name)
        result["params"] = sum(p.numel() for p in cpu_model.parameters())
    except Exception as e:
        result.update(status="not-instantiable-offline", error=first_line(e), where=where(e))
        save()
        return
    at("cpu reference")
    try:
        candidates = make_inputs(cpu_model, cfg, task, model_type)
    except Exception as e:
        result.update(status="cpu-reference-failed", stage="inputs", error=first_line(e), where=where(e))
        save()
        return
    warnings.simplefilter("ignore")
    inputs, first_error = None, None
    probe = copy.deepcopy(cpu_model)  # (a model that caches tensors on its first call keeps none from here)
    for c in candidates:  # the first input layout the CPU model accepts (with or without labels)
        for labels in ([True, False] if "labels" in c else [False]):
            try:
                with torch.no_grad():
                    run_forward(probe, c, labels)
                inputs = c
                break
            except Exception as e:
                first_error = first_error or e
        if inputs is not None:
            break
    del probe
    if inputs is None:
        result.update(status="cpu-reference-failed", stage="cpu forward", error=first_line(first_error),
                      where=where(first_error))
        save()
        return

    tpu_model = copy.deepcopy(cpu_model)  # before any CPU backward: no gradients copied
    compiled_src = copy.deepcopy(cpu_model) if do_compile else None

    # CPU reference: labels if the CPU model accepts them and returns a loss, else the projection loss.
    use_labels = "labels" in inputs
    warnings.simplefilter("ignore")
    try:
        try:
            want = run_forward(cpu_model, inputs, use_labels)
            if use_labels and (getattr(want, "loss", None) is None or not torch.isfinite(want.loss)):
                raise RuntimeError("no finite loss")
        except Exception:
            if not use_labels:
                raise
            use_labels = False
            want = run_forward(cpu_model, inputs, False)
        want_loss = loss_of(want, use_labels)
        want_loss.backward()
    except Exception as e:
        result.update(status="cpu-reference-failed", stage="cpu forward/backward", error=first_line(e),
                      where=where(e))
        save()
        return
    result["loss"] = "model loss" if use_labels else "projection"
    result["cpu_loss"] = want_loss.item()
    generative = task in GENERATIVE and hasattr(cpu_model, "generate") and getattr(cpu_model, "can_generate", lambda: True)()
    want_tokens = None
    if generative:
        try:
            gkw = generate_kwargs(task, inputs, cfg)
            with torch.no_grad():
                want_tokens = cpu_model.generate(**gkw)
        except Exception as e:
            result["generate_cpu_error"] = first_line(e)
            generative = False
    result["cpu_seconds"] = round(time.time() - start, 1)
    at("cpu reference done")

    # tpu
    torch_tpu.metrics.reset()
    numerics_ok = True
    stage = at("to(tpu)")
    t0 = time.time()
    try:
        with torch_tpu.execution_mode(mode):
            tpu_model = tpu_model.to("tpu")
            stage = at("forward")
            got = run_forward(tpu_model, to(inputs, "tpu"), use_labels)
            got_loss = loss_of(got, use_labels)
            stage = at("backward")
            got_loss.backward()
            torch_tpu.sync()
            stage = at("compare")
            result["tpu_loss"] = got_loss.item()
            ok, worst, name = compare_outputs(got, want)
            result.update(out_ok=ok, out_rel_mse=worst, out_worst=name)
            numerics_ok &= ok
            if use_labels or task == "causal-lm":
                if task == "causal-lm" and use_labels:
                    ppl_cpu, ppl_tpu = math.exp(min(want_loss.item(), 700)), math.exp(min(result["tpu_loss"], 700))
                    diff = abs(ppl_tpu - ppl_cpu) / ppl_cpu if math.isfinite(ppl_tpu) else math.inf
                    result["ppl_rel_diff"] = diff
                    result["loss_ok"] = diff <= TOLERANCE
                else:
                    rel, mse = rel_mse(got_loss.reshape(1), want_loss.detach().reshape(1))
                    result["loss_rel_mse"] = rel
                    result["loss_ok"] = rel <= TOLERANCE or mse < ABS_MSE
                numerics_ok &= result["loss_ok"]
            ok, worst, name = compare_grads(tpu_model, cpu_model)
            result.update(grad_ok=ok, grad_rel_mse=worst, grad_worst=name)
            numerics_ok &= ok
            result["compiles_fwd_bwd"] = int(torch_tpu.metrics.counters().get("compiles", 0))
            if generative:
                stage = at("generate")
                gkw = {k: (v.to("tpu") if isinstance(v, torch.Tensor) else v)
                       for k, v in generate_kwargs(task, inputs, cfg).items()}
                with torch.no_grad():
                    tokens = tpu_model.generate(**gkw).cpu()
                result["generate_ok"] = bool(tokens.shape == want_tokens.shape and torch.equal(tokens, want_tokens))
                if not result["generate_ok"]:
                    result["generate_detail"] = f"tpu {tokens[0].tolist()} vs cpu {want_tokens[0].tolist()}"
                numerics_ok &= result["generate_ok"]
        result["status"] = "pass" if numerics_ok else "numerics-fail"
        if not numerics_ok:
            bad = [k for k in ("out_ok", "loss_ok", "grad_ok", "generate_ok") if result.get(k) is False]
            detail = {"out_ok": f"output {result.get('out_worst')} relative MSE {result.get('out_rel_mse', 0):.3g}",
                      "loss_ok": (f"perplexity differs by {result.get('ppl_rel_diff', 0):.3g}" if "ppl_rel_diff" in result
                                  else f"loss relative MSE {result.get('loss_rel_mse', 0):.3g}"),
                      "grad_ok": f"gradient {result.get('grad_worst')} relative MSE {result.get('grad_rel_mse', 0):.3g}",
                      "generate_ok": f"generated tokens differ: {result.get('generate_detail')}"}
            result["error"] = "; ".join(detail[k] for k in bad)
    except Exception as e:
        result.update(status="crash", stage=stage, error=first_line(e), where=where(e))
    counters = torch_tpu.metrics.counters()
    result["compiles"] = int(counters.get("compiles", 0))
    result["cpu_fallbacks"] = int(sum(v for k, v in counters.items() if k.startswith("cpu_fallback:")))
    result["tpu_seconds"] = round(time.time() - t0, 1)
    save()

    if do_compile and result["status"] in ("pass", "numerics-fail"):
        stage = at("compile to(tpu)")
        t0 = time.time()
        before = int(torch_tpu.metrics.counters().get("compiles", 0))
        try:
            with torch_tpu.execution_mode(mode):
                model = compiled_src.to("tpu")
                compiled = torch.compile(model, backend="tpu")
                stage = at("compiled forward")
                got = run_forward(compiled, to(inputs, "tpu"), use_labels)
                got_loss = loss_of(got, use_labels)
                stage = at("compiled backward")
                got_loss.backward()
                torch_tpu.sync()
                ok_out, worst_out, _ = compare_outputs(got, want)
                ok_grad, worst_grad, name = compare_grads(model, cpu_model)
                result.update(compile_status="pass" if ok_out and ok_grad else "numerics-fail",
                              compile_out_rel_mse=worst_out, compile_grad_rel_mse=worst_grad)
                if not (ok_out and ok_grad):
                    result["compile_error"] = (f"output relative MSE {worst_out:.3g}" if not ok_out else
                                               f"gradient {name} relative MSE {worst_grad:.3g}")
        except Exception as e:
            result.update(compile_status="crash", compile_error=f"{stage}: {first_line(e)}", compile_where=where(e))
        result["compile_compiles"] = int(torch_tpu.metrics.counters().get("compiles", 0)) - before
        result["compile_seconds"] = round(time.time() - t0, 1)
        save()


# ------------------------------------------------------------------------------------------------
# The driver

def run_one(model_type, task, cls_name, args):
    fd, path = tempfile.mkstemp(prefix=f"model_{model_type}_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model_type, task, cls_name, path,
           "--mode", args.mode] + (["--compile"] if args.compile else [])
    env = dict(os.environ, PYTHONWARNINGS="ignore", TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    if not args.disk_cache:
        env["TORCH_TPU_CACHE"] = "0"  # compile counts are the model's own, whatever ran before
    start = time.time()
    killed = None  # "timeout" or "memory": the watchdog below killed the model's process group
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                                start_new_session=True)
        try:
            import psutil
            watched = psutil.Process(proc.pid)
        except Exception:
            watched = None
        peak = 0
        while proc.poll() is None:
            if time.time() - start > args.timeout:
                killed = "timeout"
            elif watched is not None:
                try:
                    rss = watched.memory_info().rss + sum(c.memory_info().rss for c in watched.children(recursive=True))
                    peak = max(peak, rss)
                    if rss > args.max_memory_gb * 2**30:
                        killed = "memory"
                except Exception:
                    pass
            if killed:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.25)
        log.seek(0)
        output = log.read()[-20000:]
    timed_out = killed == "timeout"
    seconds = round(time.time() - start, 1)
    try:
        with open(path) as f:
            result = json.load(f) if os.path.getsize(path) else {}
    except (OSError, ValueError):
        result = {}
    os.unlink(path)
    result.setdefault("model", model_type)
    result.setdefault("task", task)
    result.setdefault("class", cls_name)
    tail = [line for line in (output or "").strip().splitlines() if line.strip()]
    finished = result.get("status") is not None
    compile_pending = args.compile and result.get("status") in ("pass", "numerics-fail") and "compile_status" not in result
    if killed or not finished or compile_pending:  # the process did not finish its work
        if killed == "timeout":
            why = f"timed out after {args.timeout} s"
        elif killed == "memory":
            why = f"used more than {args.max_memory_gb:g} GiB of memory: killed"
        else:
            sig = -proc.returncode if proc.returncode and proc.returncode < 0 else None
            why = (f"process killed by signal {signal.Signals(sig).name}" if sig else
                   f"process exit status {proc.returncode}") + (f": {tail[-1][:200]}" if tail else "")
        stage = result.get("progress") or "start"
        if compile_pending:
            result.update(compile_status="timeout" if killed == "timeout" else "crash",
                          compile_error=f"{why} (stage: {stage})")
        else:
            result.update(status="timeout" if killed == "timeout" else "crash", error=why)
            result["stage"] = stage
    result["seconds"] = seconds
    return result


COUNTED = ("pass", "numerics-fail", "crash", "timeout")


def fmt(x):
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        return "0" if x == 0 else f"{x:.1e}"
    return str(x)


def write_report(results, path, args, elapsed):
    results = sorted(results, key=lambda r: r["model"])
    counted = [r for r in results if r["status"] in COUNTED]
    n = len(counted)
    crash_free = sum(r["status"] in ("pass", "numerics-fail") for r in counted)
    passed = sum(r["status"] == "pass" for r in counted)
    pct = (lambda k: f"{100 * k / n:.0f}%" if n else "-")
    import torch
    import transformers
    cmd = "python tools/models.py" + (f" --models {args.models}" if args.models else "") + \
          (" --slice" if args.slice else "") + (" --compile" if args.compile else "") + \
          (f" --mode {args.mode}" if args.mode != "strict" else "") + f" --out {os.path.relpath(path, ROOT)}"
    lines = [
        "# Hugging Face model coverage",
        "",
        f"Generated by `{cmd}` (`make models`) on {datetime.date.today()}: transformers "
        f"{transformers.__version__}, torch {torch.__version__}, execution mode `{args.mode}`, "
        f"{len(results)} model types in {elapsed / 60:.0f} min. Do not edit by hand.",
        "",
        "Each model type is built from its default config shrunk to a tiny size (hidden 64, 2 layers, 4 heads, "
        "vocab 128; see `tools/models.py`), on CPU with a fixed seed, deep-copied to tpu, and run in eval mode on "
        "the same random inputs on both: forward, loss (the model's own with labels, else a fixed random "
        "projection of its outputs), backward, and for generative heads greedy `generate` of 4 tokens. "
        "Weight matrices a model initialises to a constant (zero-initialised MoE routers) get small random values "
        "first: exactly tied routing scores are ordered by each top-k implementation's own rule. "
        "Tolerances: causal LM perplexity within 10% relative; each float output relative MSE <= 0.1 or MSE < 0.05; "
        "each gradient relative MSE <= 0.1; generated tokens equal to CPU's. The columns show the worst "
        "measured relative MSE (output, gradient) and the relative perplexity difference.",
        "",
        "## Totals",
        "",
        f"- attempted (built and ran on CPU): **{n}**",
        f"- crash-free on tpu (pass + numerics-fail): **{crash_free}/{n} ({pct(crash_free)})**",
        f"- numerics pass (forward, loss, gradients, generate all match CPU): **{passed}/{n} ({pct(passed)})**",
        f"- crash: {sum(r['status'] == 'crash' for r in counted)}, timeout ({args.timeout} s): "
        f"{sum(r['status'] == 'timeout' for r in counted)}, numerics-fail: {sum(r['status'] == 'numerics-fail' for r in counted)}",
        f"- left out: not instantiable offline {sum(r['status'] == 'not-instantiable-offline' for r in results)}, "
        f"CPU reference run failed {sum(r['status'] == 'cpu-reference-failed' for r in results)}",
    ]
    if args.compile:
        comp = [r for r in counted if r.get("compile_status")]
        cp = sum(r["compile_status"] == "pass" for r in comp)
        cf = sum(r["compile_status"] in ("pass", "numerics-fail") for r in comp)
        lines.append(f"- torch.compile(backend=\"tpu\") forward+backward (models that ran eagerly): "
                     f"crash-free {cf}/{len(comp)}, numerics pass {cp}/{len(comp)}")
    lines += ["", "## Models", "",
              "| model | class | status | loss | ppl diff | output rel MSE | grad rel MSE | generate | compiles "
              "(fwd+bwd / all) | s |" + (" compiled | compiled compiles |" if args.compile else ""),
              "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.compile else "")]
    for r in results:
        if r["status"] not in COUNTED:
            continue
        gen = {True: "same", False: "differs", None: ""}[r.get("generate_ok")]
        if r["task"] in GENERATIVE and r.get("generate_ok") is None and r["status"] == "crash" and r.get("stage") == "generate":
            gen = "crash"
        comp = f"{r.get('compiles_fwd_bwd', '')} / {r.get('compiles', '')}" if "compiles" in r else ""
        row = (f"| {r['model']} | {r['class']} | {r['status']} | {r.get('loss', '')} | {fmt(r.get('ppl_rel_diff'))} | "
               f"{fmt(r.get('out_rel_mse'))} | {fmt(r.get('grad_rel_mse'))} | {gen} | {comp} | {r.get('seconds', '')} |")
        if args.compile:
            row += f" {r.get('compile_status', '')} | {r.get('compile_compiles', '')} |"
        lines.append(row)
    failures = [r for r in counted if r["status"] != "pass"]
    lines += ["", "## Failures", "", "First error line (stage; where: the innermost frame outside torch).", ""]
    for r in failures:
        loc = f" ({r['stage']}{'; ' + r['where'] if r.get('where') else ''})" if r.get("stage") else ""
        lines.append(f"- **{r['model']}** ({r['status']}){loc}: `{r.get('error', '')}`")
    if not failures:
        lines.append("None.")
    if args.compile:
        cfail = [r for r in counted if r.get("compile_status") not in (None, "pass")]
        lines += ["", "## torch.compile failures", ""]
        for r in cfail:
            lines.append(f"- **{r['model']}** ({r['compile_status']}): `{r.get('compile_error', '')}`"
                         + (f" ({r['compile_where']})" if r.get("compile_where") else ""))
        if not cfail:
            lines.append("None.")
    left = [r for r in results if r["status"] not in COUNTED]
    lines += ["", "## Left out of the totals", ""]
    for r in left:
        lines.append(f"- **{r['model']}** ({r['class']}, {r['status']}{'; ' + r['stage'] if r.get('stage') else ''}): "
                     f"`{r.get('error', '')}`")
    if not left:
        lines.append("None.")
    lines += ["", "timm is not swept: every timm release requires torchvision (imported by `timm.layers` at "
              "`import timm`), which this project does not install.", ""]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return n, crash_free, passed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated model types (e.g. gpt2,llama)")
    p.add_argument("--slice", action="store_true", help="a short diverse slice: " + ",".join(SLICE))
    p.add_argument("--workers", type=int, default=1, help="models run at the same time (default 1)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per model (default 300)")
    p.add_argument("--max-memory-gb", type=float, default=6.0,
                   help="a model process using more memory than this is killed (default 6)")
    p.add_argument("--out", help="write the markdown report here (e.g. docs/model_coverage.md)")
    p.add_argument("--results", default=os.path.join(ROOT, "build", "models", "results.jsonl"),
                   help="one JSON line per model, appended as models finish")
    p.add_argument("--resume", action="store_true", help="skip models already in --results")
    p.add_argument("--compile", action="store_true", help="also run forward+backward through torch.compile(backend='tpu')")
    p.add_argument("--mode", default="strict", choices=["strict", "fuse"], help="tpu execution mode")
    p.add_argument("--disk-cache", action="store_true",
                   help="use the persistent compile cache (faster reruns; compile counts then omit cache hits)")
    p.add_argument("--list", action="store_true", help="print the catalog and exit")
    p.add_argument("--report-only", action="store_true", help="rewrite --out from --results without running")
    p.add_argument("--worker", nargs=4, metavar=("TYPE", "TASK", "CLASS", "RESULT"), help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker:
        worker(*args.worker[:3], args.mode, args.compile, args.worker[3])
        return 0

    cat = catalog()
    if args.models or args.slice:
        names = args.models.split(",") if args.models else SLICE
        unknown = [m for m in names if m not in cat]
        if unknown:
            p.error(f"unknown model types (not in the swept mappings): {', '.join(unknown)}")
        todo = [(m, *cat[m]) for m in names]
    else:
        todo = [(m, *v) for m, v in cat.items()]
    if args.list:
        for m, task, cls in todo:
            print(f"{m:32} {task:22} {cls}")
        return 0
    if args.report_only:
        if not args.out:
            p.error("--report-only needs --out")
        wanted = {m for m, _, _ in todo}
        latest = {}
        with open(args.results) as f:
            for line in f:
                r = json.loads(line)
                if r["model"] in wanted:
                    latest[r["model"]] = r
        elapsed = sum(r.get("seconds", 0) for r in latest.values())
        n, crash_free, passed = write_report(list(latest.values()), os.path.join(ROOT, args.out), args, elapsed)
        print(f"attempted {n}, crash-free {crash_free}, numerics pass {passed}; wrote {args.out}")
        return 0

    results = []
    done = set()
    if args.resume and os.path.exists(args.results):
        with open(args.results) as f:
            for line in f:
                r = json.loads(line)
                results = [x for x in results if x["model"] != r["model"]] + [r]
        wanted = {m for m, _, _ in todo}
        results = [r for r in results if r["model"] in wanted]
        done = {r["model"] for r in results}
    elif os.path.exists(args.results):
        os.unlink(args.results)
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    todo = [t for t in todo if t[0] not in done]

    start = time.time()
    print(f"{len(todo)} models to run ({len(done)} already in {args.results}); {args.workers} worker(s), "
          f"timeout {args.timeout} s", flush=True)
    from concurrent.futures import ThreadPoolExecutor, as_completed
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {pool.submit(run_one, m, task, cls, args): m for m, task, cls in todo}
        for i, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            with open(args.results, "a") as f:
                f.write(json.dumps(r) + "\n")
            extra = f" compiled={r['compile_status']}" if r.get("compile_status") else ""
            print(f"[{i}/{len(todo)}] {r['model']:28} {r['status']:24} {r.get('seconds', '')}s "
                  f"compiles={r.get('compiles', '')}{extra} {r.get('error', '')[:150]}", flush=True)

    counted = [r for r in results if r["status"] in COUNTED]
    n = len(counted)
    crash_free = sum(r["status"] in ("pass", "numerics-fail") for r in counted)
    passed = sum(r["status"] == "pass" for r in counted)
    print(f"attempted {n}, crash-free {crash_free}, numerics pass {passed}; left out "
          f"{len(results) - n}; {time.time() - start:.0f} s", flush=True)
    if args.out:
        write_report(results, os.path.join(ROOT, args.out) if not os.path.isabs(args.out) else args.out,
                     args, time.time() - start)
        print(f"wrote {args.out}")
    if args.slice or args.models:
        return 0 if passed == n and n == len(todo) + len(done) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
