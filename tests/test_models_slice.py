"""A slice of the Hugging Face model sweep (tools/models.py; `make models` runs all of it): three quick
architectures of different kinds, each in its own process, must match CPU (forward, loss, every
gradient, and greedy generation for the causal LM) and the report must be written."""
import json
import os
import subprocess
import sys

import pytest


pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SLICE = ["gpt2", "bert", "vit"]  # causal LM + generate, masked LM, image classification


def test_sweep_slice_matches_cpu(tmp_path):
    results, report = tmp_path / "results.jsonl", tmp_path / "coverage.md"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models.py"), "--models", ",".join(SLICE),
                           "--results", str(results), "--out", str(report), "--timeout", "120"],
                          capture_output=True, text=True, cwd=ROOT, timeout=400)
    rows = {r["model"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert set(rows) == set(SLICE), proc.stdout + proc.stderr
    for name, r in rows.items():
        assert r["status"] == "pass", f"{name}: {r['status']}: {r.get('error')}\n{proc.stdout}"
        assert r["compiles"] > 0 and r["cpu_fallbacks"] == 0, r
        assert r["out_rel_mse"] < 1e-8 and r["grad_rel_mse"] < 1e-8, r  # far inside the sweep's tolerance
    assert rows["gpt2"]["loss"] == "model loss" and rows["gpt2"]["generate_ok"] is True
    assert rows["gpt2"]["ppl_rel_diff"] < 1e-4
    assert rows["bert"]["loss"] == "model loss" and rows["vit"]["loss"] == "model loss"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = report.read_text()
    assert "numerics pass (forward, loss, gradients, generate all match CPU): **3/3 (100%)**" in text, text


def test_configs_are_shrunk():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import models
    finally:
        sys.path.pop(0)
    cfg = models.small_config("llama")
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.vocab_size) == (64, 2, 4, 128)
    cfg = models.small_config("qwen3_moe")
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size) == (4, 2, 32)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_key_value_heads) == (64, 2, 2)
    cfg = models.small_config("gemma3")  # sub-configs and per-layer lists shrink too
    assert cfg.text_config.num_hidden_layers == len(cfg.text_config.layer_types) == 2
    cfg = models.small_config("t5")
    assert cfg.decoder_start_token_id is not None and cfg.num_layers == 2
