"""PyTorch's inference fast paths on tpu. In eval mode without grad, nn.TransformerEncoderLayer and
nn.MultiheadAttention call fused kernels of their own (`_transformer_encoder_layer_fwd`,
`_native_multi_head_attention`) on every device PyTorch lists, which includes ours. On tpu they are the
same math in ordinary ops, each lowered as usual. nn.TransformerEncoder's nested-tensor path (padding
dropped, padded positions zero) needs nested tensors, which tpu lacks: it takes the dense path, whose padded
positions hold values as in training mode."""
import torch
import torch.nn.functional as F

_lib = torch.library.Library("aten", "IMPL")


def _attention_mask(mask, mask_type):
    """The mask as (batch, heads, query, key)-broadcastable; mask_type 1 is a (batch, key) padding mask."""
    if mask is None:
        return None
    return mask[:, None, None, :] if mask_type == 1 else mask


def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                 proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                 mask_type=None):
    torch._check(query.dim() == 3, lambda: "_native_multi_head_attention: expected (batch, length, embed) inputs")
    w_q, w_k, w_v = qkv_weight.chunk(3)
    b_q, b_k, b_v = qkv_bias.chunk(3)
    batch, head_dim = query.shape[0], embed_dim // num_head

    def heads(x, w, b):
        return F.linear(x, w, b).view(batch, x.shape[1], num_head, head_dim).transpose(1, 2)

    q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
    scores = (q * head_dim ** -0.5) @ k.transpose(-2, -1)
    mask = _attention_mask(mask, mask_type)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = scores.softmax(-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, query.shape[1], embed_dim)
    out = F.linear(out, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, weights.mean(1) if average_attn_weights else weights


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                   use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                   norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                   mask_type=None):
    def norm(x, w, b):
        return F.layer_norm(x, (embed_dim,), w, b, eps)

    def attention(x):
        return _native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                            proj_bias, mask, False, mask_type=mask_type)[0]

    def feed_forward(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2)

    if norm_first:
        x = src + attention(norm(src, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(src + attention(src), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def _nested_tensor_from_mask_left_aligned(t, mask):
    # "not left aligned" is what sends nn.TransformerEncoder down the dense path
    return False


_lib.impl("_nested_tensor_from_mask_left_aligned", _nested_tensor_from_mask_left_aligned, "PrivateUse1")
_lib.impl("_native_multi_head_attention", _native_multi_head_attention, "PrivateUse1")
_lib.impl("_transformer_encoder_layer_fwd", _transformer_encoder_layer_fwd, "PrivateUse1")
