#!/usr/bin/env python3
"""Export a PyTorch model as TorchScript, for `sparsgd train --model FILE.pt`.

sparsgd trains any scripted module whose forward fits the task, without recompiling:

    .venv/bin/python examples/export_torchscript.py --task fashion-mnist --out convnet.pt
    build/sparsgd train --model convnet.pt --workers 4

What forward must do, per --task:
    fashion-mnist   [B, 1, 28, 28] float32 -> [B, 10] logits
    cifar10         [B, 3, 32, 32] float32 -> [B, 10] logits
    lm              [B, T] int64 token ids -> [B, T, V] logits, V the vocabulary of train.txt
                    (pass --vocabulary V: `sparsgd train --task lm` prints it in its error when the
                    model's V differs; no recurrent state is carried between segments)

The parameters are trained in place, exchanged and checkpointed as a built-in model's are; its
buffers (batch-norm statistics) are averaged over the workers before each evaluation. Replace the
classes below with your own model: anything torch.jit.script accepts works.
"""

import argparse
import sys

import torch
from torch import nn


class ConvNet(nn.Module):
    """A small convolutional classifier with batch norm, for any image size."""

    def __init__(self, channels: int, classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class GruLanguageModel(nn.Module):
    """Embedding, one GRU layer, decoder: tokens [B, T] -> logits [B, T, V]."""

    def __init__(self, vocabulary: int, width: int):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.decoder = nn.Linear(width, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.embedding(tokens))
        return self.decoder(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=["fashion-mnist", "cifar10", "lm"], default="fashion-mnist")
    parser.add_argument("--out", required=True, help="where to write the TorchScript file (*.pt)")
    parser.add_argument("--classes", type=int, default=10, help="image tasks: outputs (10 fits them)")
    parser.add_argument("--vocabulary", type=int, default=0, help="lm: the vocabulary size of train.txt")
    parser.add_argument("--width", type=int, default=64, help="lm: embedding and GRU width")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if args.task == "lm":
        if args.vocabulary < 2:
            parser.error("--task lm needs --vocabulary V (the number of distinct words of train.txt, plus <eos>)")
        model = GruLanguageModel(args.vocabulary, args.width)
    else:
        model = ConvNet(1 if args.task == "fashion-mnist" else 3, args.classes)
    scripted = torch.jit.script(model)
    try:
        scripted.save(args.out)
    except (OSError, RuntimeError) as error:
        print(f"export_torchscript.py: cannot write {args.out}: {error}", file=sys.stderr)
        return 1
    parameters = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {type(model).__name__}, {parameters} parameters, for --task {args.task}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
