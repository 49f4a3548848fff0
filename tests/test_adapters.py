"""The torchvision and transformers adapters, built from a config with nothing downloaded: a
stand-in package records how it was asked (no weights, the config's values), the workload
trains and infers, and a package that is not installed is one line that says what to run.
With transformers installed, a tiny real model too."""
import sys
import types

import pytest
import torch
from torch import nn

from torchgate.workloads import adapters

CPU = {"device": torch.device("cpu"), "dtype": torch.float32, "compile": lambda m: m, "seed": 0}


def fake_torchvision(asked: list):
    def get_model(name, **kwargs):
        asked.append((name, kwargs))
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(4, kwargs["num_classes"]))
    return types.SimpleNamespace(models=types.SimpleNamespace(get_model=get_model))


def test_a_torchvision_model_is_built_without_weights_and_counts_its_flops(monkeypatch):
    asked = []
    monkeypatch.setitem(sys.modules, "torchvision", fake_torchvision(asked))
    infer = adapters.torchvision_model(**CPU, name="resnet50", batch=2, image=8, classes=5,
                                       options={"width_per_group": 64})
    assert asked == [("resnet50", {"weights": None, "num_classes": 5, "width_per_group": 64})]
    assert infer.step().shape == (2, 5) and infer.items == 2
    # 2 images: a 3x3 conv of 3 -> 4 channels over 8x8 outputs, and a 4 -> 5 linear layer.
    assert infer.flops == 2 * (2 * 4 * 8 * 8 * 3 * 9 + 2 * 5 * 4)
    train = adapters.torchvision_model(**CPU, name="resnet50", batch=2, image=8, classes=5,
                                       train=True)
    first, second = train.step()["loss"], train.step()["loss"]
    assert torch.isfinite(first) and not torch.equal(first, second)     # it learns


def test_a_package_that_is_not_installed_says_what_to_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)    # import fails
    with pytest.raises(RuntimeError, match=r"^transformers is not installed in the measured "
                                           r"environment: pip install transformers"):
        adapters.transformers_model(**CPU, model_type="gpt2")


def test_a_tiny_transformers_model_infers_and_trains_from_its_config():
    pytest.importorskip("transformers")
    tiny = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 100, "n_positions": 32,
            "bos_token_id": 0, "eos_token_id": 0}
    infer = adapters.transformers_model(**CPU, model_type="gpt2", config=tiny, batch=2, seq=8)
    assert infer.step().shape == (2, 8, 100) and infer.items == 16
    train = adapters.transformers_model(**CPU, model_type="gpt2", config=tiny, batch=2, seq=8,
                                        train=True)
    assert torch.isfinite(train.step()["loss"])
