"""The model workloads (stages/workloads/: vision, decoder, recsys, control, lowp) at tiny
sizes: each builds and runs a step in eager on the CPU in float32 and bfloat16, says how
many items and FLOPs a step has (checked against torch's flop counter where it counts them),
and does what its module says (a KV cache that gives the prompt's own logits, sparse
gradients, branches that every precision takes alike, int8 and float8 where they run)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from torchgate.core.config import parse_workloads
from torchgate.core.metrics import BY_NAME
from torchgate.core.vocabulary import UnitKey
from torchgate.judge.tolerance import own_tolerance
from torchgate.measure.accuracy import error_metrics, flatten
from torchgate.workloads import Unsupported
from torchgate.workloads.control import branchy
from torchgate.workloads.decoder import gpt, step_flops
from torchgate.workloads.lowp import float8_support, fp8_matmul, int8_mlp
from torchgate.workloads.recsys import DLRM, dlrm, skewed_ids
from torchgate.workloads.vision import resnet

CPU = torch.device("cpu")
CONF = Path(__file__).resolve().parent.parent / "conf"
GPT = dict(batch=2, prompt=8, vocab=32, width=16, layers=1, heads=2, new_tokens=3)
TINY = {
    "resnet_infer": (resnet, dict(batch=2, image=8, width=4, blocks=[1, 1], classes=3)),
    "resnet_train": (resnet, dict(train=True, batch=2, image=8, width=4, blocks=[1, 1],
                                  classes=3, train_steps=2)),
    "gpt_prefill": (gpt, dict(phase="prefill", **GPT)),
    "gpt_decode": (gpt, dict(phase="decode", cache_lengths=[12, 16], **GPT)),
    "gpt_generate": (gpt, dict(phase="generate", **GPT)),
    "dlrm_train": (dlrm, dict(batch=8, tables=2, rows=50, dim=4, bag=3, dense=5, bottom=[8],
                              top=[8], train_steps=2)),
    "branchy": (branchy, dict(batch=2, width=16, heads=2, layers=2, lengths=[8, 12, 20],
                              chunk=16)),
    "int8_mlp": (int8_mlp, dict(batch=4, width=16, hidden=32, layers=1)),
    "fp8_matmul": (fp8_matmul, dict(size=16, on_cpu=True)),
}
# What a cell cannot run by design: (workload, dtype) -> a word of the reason.
UNSUPPORTED = {("int8_mlp", torch.bfloat16): "float32"}


def build(name: str, dtype=torch.float32, compile=lambda f: f, **changes):
    factory, kwargs = TINY[name]
    return factory(device=CPU, dtype=dtype, compile=compile, seed=0, **{**kwargs, **changes})


def outputs(workload) -> dict[str, torch.Tensor]:
    out = None
    for _ in range(max(1, workload.train_steps)):
        out = workload.step()
    named = flatten(out)
    if workload.state is not None:
        named.update(flatten(workload.state(), "state"))
    return {k: v.detach().clone() for k, v in named.items()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(TINY))
def test_each_model_runs_a_step_in_eager_and_says_what_a_step_is(name, dtype):
    if (name, dtype) in UNSUPPORTED:
        with pytest.raises(Unsupported, match=UNSUPPORTED[name, dtype]):
            build(name, dtype)
        return
    workload = build(name, dtype)
    found = outputs(workload)
    assert found and all(bool(torch.isfinite(t.float()).all()) for t in found.values())
    assert isinstance(workload.items, int) and workload.items > 0
    assert workload.flops is None or (math.isfinite(workload.flops) and workload.flops > 0)
    if workload.shapes:
        labels = list(workload.shapes)
        assert workload.shapes[labels[0]] is workload.step and len(set(labels)) == len(labels)
        for step in workload.shapes.values():
            step()


def counted(step, ops: tuple[str, ...] | None = None) -> int:
    """The FLOPs torch's flop counter sees in one call of `step` (of `ops` only)."""
    with FlopCounterMode(display=False) as counter:
        step()
    if ops is None:
        return counter.get_total_flops()
    return sum(n for op, n in counter.get_flop_counts()["Global"].items()
               if str(op).split(".")[1] in ops)


@pytest.mark.parametrize("name", ["resnet_infer", "resnet_train"])
def test_the_resnet_flops_are_every_convolution_and_matmul_forward_and_backward(name):
    workload = build(name, torch.float64)
    assert workload.flops == counted(workload.step)


def test_the_decoder_flops_are_its_matmuls_and_the_attention_it_defines():
    # By hand, width 2: 3 prompt tokens through 12 w^2 multiply-adds of weights each, attending
    # causally to 1, 2 and 3 positions (q @ k^T and p @ v), the last one's logits.
    assert step_flops(1, 3, 3, 2, 1, 5) == 3 * 2 * 12 * 4 + 2 * 2 * (1 + 2 + 3) * 2 + 2 * 2 * 5
    w, layers, vocab, b = GPT["width"], GPT["layers"], GPT["vocab"], GPT["batch"]
    for phase, new, context in (("prefill", 8, 8), ("decode", 1, 9)):
        workload = build(f"gpt_{phase}", torch.float64)
        pairs = new * context - new * (new - 1) // 2
        attention = layers * 2 * 2 * pairs * w * b
        # torch's counter sees the matmuls; scaled_dot_product_attention on the CPU it does
        # not count.
        assert workload.flops - attention == counted(workload.step, ("mm", "addmm", "bmm"))
    generate = build("gpt_generate", torch.float64)
    assert generate.flops == sum(step_flops(b, 1, 8 + i + 1, w, layers, vocab)
                                 for i in range(3))


def test_the_dlrm_flops_are_its_mlps_matmuls_forward_and_backward():
    workload = build("dlrm_train", torch.float64)
    assert workload.flops == counted(workload.step, ("mm", "addmm"))


def test_int8_and_float8_flops_are_the_float_products():
    assert build("int8_mlp", torch.float64).flops == counted(build("int8_mlp",
                                                                   torch.float64).step)
    fp8 = build("fp8_matmul")
    assert fp8.flops == counted(fp8.step) == 2 * 16 ** 3
    assert fp8.bytes_moved == 2 * 16 * 16 + 16 * 16 * 4       # float8 in, float32 out


def test_the_kv_cache_gives_what_a_prefill_of_the_longer_prompt_gives():
    """A decode step at cache length n is the prompt of n + 1 tokens' last logits; generation's
    i-th logits are the prompt of prompt + i + 1 tokens' last."""
    def prefill(n: int) -> torch.Tensor:
        return build("gpt_prefill", torch.float64, prompt=n).step()
    decode = build("gpt_decode", torch.float64)
    for label, step in decode.shapes.items():
        n = int(label.split("=")[1])
        assert torch.allclose(step(), prefill(n + 1), atol=1e-10)
        assert torch.equal(step(), step())           # the step leaves the cache as it was
    generated = build("gpt_generate", torch.float64).step()
    for i in range(3):
        assert torch.allclose(generated[:, i:i + 1], prefill(8 + i + 1), atol=1e-10)


def test_bad_decoder_settings_say_what_to_change():
    with pytest.raises(ValueError, match="phase must be one of prefill, decode, generate"):
        build("gpt_decode", phase="train")
    with pytest.raises(ValueError, match="multiple of heads"):
        build("gpt_decode", width=15)


def test_the_recommender_gradients_are_sparse_and_its_ids_skewed():
    model = DLRM(2, 50, 4, 5, [8], [8])
    ids = [torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])]
    model(torch.randn(2, 5), ids, [torch.tensor([0, 2])] * 2).sum().backward()
    assert all(e.weight.grad.is_sparse for e in model.embeddings)
    drawn = skewed_ids(20_000, 10_000, torch.Generator().manual_seed(0))
    hot = torch.bincount(drawn, minlength=10_000).sort(descending=True).values[:100].sum()
    assert 0 <= int(drawn.min()) and int(drawn.max()) < 10_000
    assert hot / 20_000 > 0.4            # P(rank) ~ 1/rank: the top 1 % of rows, half the ids
    outputs(build("dlrm_train", optimizer="sgd", lr=0.1))
    with pytest.raises(ValueError, match="optimizer must be one of sparse_adam, sgd"):
        build("dlrm_train", optimizer="adagrad")


@pytest.mark.parametrize("name", ["branchy", "resnet_train", "gpt_generate"])
def test_bfloat16_takes_the_path_float32_does(name):
    """Branches far from their boundary: bfloat16's outputs stay close to float32's (a gate
    that flipped would move them by their own size)."""
    lo, hi = outputs(build(name, torch.bfloat16)), outputs(build(name, torch.float32))
    for key, t in hi.items():
        assert error_metrics(lo[key], t).rel_l2 < 0.1, key


def test_special_dtypes_run_only_where_they_have_kernels():
    with pytest.raises(Unsupported, match="float8 matmul needs a GPU with float8 tensor cores"):
        build("fp8_matmul", on_cpu=False)
    assert float8_support(CPU) and "cpu" in float8_support(CPU)
    with pytest.raises(Unsupported, match="int8 dynamic quantization runs on the CPU"):
        int8_mlp(device=torch.device("meta"), dtype=torch.float32, compile=lambda f: f, seed=0)
    # The float64 reference is the unquantized model and the exact product.
    ref, q = build("int8_mlp", torch.float64).step(), build("int8_mlp").step()
    assert ref.dtype == torch.float64 and 0 < error_metrics(q, ref).rel_l2 < 0.05
    exact = build("fp8_matmul", torch.float64).step()
    assert 0 < error_metrics(build("fp8_matmul").step(), exact).rel_l2 < 0.1


def configured(name: str):
    spec = parse_workloads(yaml.safe_load((CONF / "workload" / f"{name}.yaml").read_text()))
    return spec[name]


def precision(name: str):
    from torchgate.core.config import PrecisionSpec
    body = yaml.safe_load((CONF / "precision" / f"{name}.yaml").read_text())[name]
    return PrecisionSpec(name, **body)


@pytest.mark.slow
@pytest.mark.parametrize("prec", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["resnet_train", "resnet_infer", "gpt_prefill", "gpt_decode",
                                  "dlrm_train", "branchy", "int8_mlp"])
def test_the_configured_models_pass_their_tolerance_with_room(name, prec):
    """At the sizes conf/workload/ gives them: every output's error against float64 within
    half the tolerance they are judged by (the precision's, or their own)."""
    spec, p = configured(name), precision(prec)
    factory = {"resnet": resnet, "gpt": gpt, "dlrm": dlrm, "branchy": branchy,
               "int8_mlp": int8_mlp}[spec.target.rsplit(".", 1)[1]]
    torch.manual_seed(0)

    def run(dtype):
        return outputs(factory(device=CPU, dtype=dtype, compile=lambda f: f, seed=0,
                               **spec.kwargs))
    reference = run(torch.float64)
    try:
        found = run(getattr(torch, p.dtype))
    except Unsupported:
        assert (name, prec) == ("int8_mlp", "bf16")
        return
    tol = own_tolerance(p, spec).rel_l2_tol
    for key, t in found.items():
        assert error_metrics(t, reference[key]).rel_l2 <= tol / 2, (key, tol)


def compiled_run(target: str, **kwargs):
    """One compiled mode of a workload measured as a worker does (tiny timing settings)."""
    from torchgate.core.config import DeviceSpec, PrecisionSpec
    from torchgate.core.config.settings import WorkloadSpec
    from torchgate.core.records.job import Job, Timing
    from torchgate.core.vocabulary import Status
    from torchgate.measure.worker import bench_mode
    spec = WorkloadSpec("w", target, kwargs)
    job = Job("bench", 0, DeviceSpec("cpu", "cpu"), PrecisionSpec("fp32", "float32"), (spec,),
              ("compiled",), Timing(2, 0.002, 0.01, 2, 1.0))
    from torchgate.core.config.targets import load_target
    found = bench_mode(job, load_target(target), CPU, "compiled")
    assert found.status == Status.OK, found.error
    return found


@pytest.mark.slow
def test_the_kv_cache_growing_recompiles_unless_its_length_is_marked_dynamic():
    kwargs = {**GPT, "phase": "decode", "cache_lengths": [12, 16]}
    grown = compiled_run("torchgate.workloads.decoder.gpt", **kwargs)
    assert [s.shape for s in grown.shapes] == ["kv=12", "kv=16"]
    assert grown.shapes[0].recompiles >= 1 and "size mismatch" in grown.shapes[0].recompile_reasons[0]
    marked = compiled_run("torchgate.workloads.decoder.gpt", mark_dynamic=True, **kwargs)
    assert [s.recompiles for s in marked.shapes] == [0, 0] and marked.recompiles == 0


@pytest.mark.slow
def test_a_second_kind_of_data_dependent_branch_is_a_new_break_reason_and_regressed():
    from torchgate.judge.portability import new_reasons
    from torchgate.judge.timings import _counted_row
    kwargs = dict(TINY["branchy"][1], lengths=[8, 12])
    plain = compiled_run("torchgate.workloads.control.branchy", **kwargs)
    clipped = compiled_run("torchgate.workloads.control.branchy", clip=100.0, **kwargs)
    assert plain.graph_breaks >= 1 and plain.recompiles >= 1
    assert any("Data-dependent branching" in r for r in plain.graph_break_reasons)
    new = new_reasons(clipped.graph_break_reasons, plain.graph_break_reasons)
    assert new and all("Tensor.item()" in r for r in new)
    key = UnitKey("bench", "cpu-fp32", "branchy", "compiled", "graph_breaks")
    row = _counted_row(key, BY_NAME["graph_breaks"], plain.graph_breaks, clipped.graph_breaks,
                       clipped.graph_break_reasons, plain.graph_break_reasons)
    assert row.verdict == "REGRESSED" and "Tensor.item()" in row.note
