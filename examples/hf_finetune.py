"""A few steps of masked-LM fine-tuning of a tiny BERT on tpu with the Transformers Trainer.

The Trainer picks the tpu device by itself (Transformers sees torch_tpu as the "tpu" accelerator:
TrainingArguments.device is tpu:0); Accelerate, which the Trainer uses to place the model, is told
the same with ACCELERATE_TORCH_DEVICE=tpu (set below), else it would move the model back to the CPU.
The data is synthetic and learnable (each sequence counts up from a random start in runs of 4 equal
tokens, 15% of them masked). Exits with status 1 if the loss does not fall.

    python examples/hf_finetune.py
    python examples/hf_finetune.py --steps 200 --report
"""
import argparse
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "tpu")  # before Accelerate's state is created

import torch  # noqa: E402
import transformers  # noqa: E402

VOCAB, SEQ, MASK_ID = 64, 16, 3


class CountingDataset(torch.utils.data.Dataset):
    """Sequences s, s, s, s, s+1, s+1, ... (mod the vocab, above the special ids); 15% masked for MLM."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        start = torch.randint(0, VOCAB - 4, (1,), generator=g)
        ids = 4 + (start + torch.arange(SEQ) // 4) % (VOCAB - 4)  # runs of 4 equal tokens
        masked = torch.rand(SEQ, generator=g) < 0.15
        masked[torch.randint(0, SEQ, (1,), generator=g)] = True  # at least one
        return {"input_ids": torch.where(masked, MASK_ID, ids), "attention_mask": torch.ones(SEQ, dtype=torch.long),
                "labels": torch.where(masked, ids, -100)}


class Losses(transformers.TrainerCallback):
    def __init__(self):
        self.losses, self.device = [], None

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
            self.device = next(model.parameters()).device
            print(f"step {state.global_step:3d}  loss {float(logs['loss']):.4f}  (model on {self.device})", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", action="store_true", help="print torch_tpu.metrics.report()")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()

    torch.manual_seed(args.seed)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64, pad_token_id=0)
    model = transformers.BertForMaskedLM(cfg)
    losses = Losses()
    with tempfile.TemporaryDirectory() as out:
        training = transformers.TrainingArguments(
            output_dir=out, use_cpu=False, per_device_train_batch_size=16, max_steps=args.steps,
            learning_rate=args.lr, warmup_steps=5, logging_steps=1, save_strategy="no", report_to=[],
            disable_tqdm=True, seed=args.seed, dataloader_num_workers=0)
        print(f"TrainingArguments.device: {training.device}")
        trainer = transformers.Trainer(model=model, args=training, train_dataset=CountingDataset(16 * args.steps),
                                       callbacks=[losses])
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # our callback prints
        t0 = time.time()
        trainer.train()
        seconds = time.time() - t0
    print(f"{args.steps} steps in {seconds:.1f} s (the first compiles); loss {losses.losses[0]:.3f} -> "
          f"{sum(losses.losses[-5:]) / 5:.3f} (mean of the last 5)")
    if args.report:
        import torch_tpu
        torch_tpu.metrics.report()
    if losses.device is None or losses.device.type != "tpu":
        print(f"FAIL: the model trained on {losses.device}, not tpu")
        return 1
    if not sum(losses.losses[-5:]) / 5 < losses.losses[0]:
        print("FAIL: the loss did not fall")
        return 1
    print("OK: the loss fell, training on tpu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
