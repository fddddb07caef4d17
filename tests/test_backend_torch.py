"""What the PyTorch backend does differently on CUDA, learnt from the H100 run in
example-results/cuda-h100 and checked here on the CPU: LSTM cells there failed in cuDNN's
RNN backward (eval mode) and in jacrev over cuDNN's LSTM kernel."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from adbench import spec
from adbench.backends import UnsupportedCell
from adbench.backends import torch_backend as tb


def lstm_net():
    model = spec.MODELS["lstm"]
    workload = spec.Workload(model="lstm", seed=0, task="jacobian_rows")
    net, _ = tb.build(model, spec.make_params(workload), torch.device("cpu"), torch.float64)
    x = torch.from_numpy(spec.make_batches(workload)[0]["x"]).double().requires_grad_()
    return net, x


def test_the_rnn_layers_cudnn_needs_in_train_mode_compute_what_eval_mode_computes():
    """On CUDA the LSTM layer is put in train mode (cuDNN's RNN backward refuses eval mode):
    without dropout its output and input gradient are the eval-mode ones; on the CPU it stays
    in eval mode, and only the CUDA cells' provenance says so."""
    net, x = lstm_net()
    rnns = tb._cudnn_rnns(net)
    assert [type(m) for m in rnns] == [torch.nn.LSTM] and not rnns[0].training
    results = {}
    for training in (False, True):
        rnns[0].train(training)
        out = net.model(x, None)
        (grad,) = torch.autograd.grad(out.sum(), x)
        results[training] = (out.detach(), grad)
    assert torch.equal(results[False][0], results[True][0])
    assert torch.equal(results[False][1], results[True][1])
    assert "train mode" in tb.inference_mode(net, "cuda")
    assert "train mode" not in tb.inference_mode(net, "cpu")


@pytest.mark.parametrize("mode", list(spec.FRAMEWORKS["torch"].modes))
def test_jacrev_over_cudnns_lstm_is_refused_with_its_reason(mode):
    """The error jacrev raised over cuDNN's LSTM on the H100 makes the cell unsupported, with
    PyTorch's issue named; the same error from another model still fails the cell."""
    def fails(*_):
        raise NotImplementedError("Cannot access storage of TensorWrapper")

    lstm = spec.Workload(model="lstm", seed=0, task="jacobian_vectorized")
    with pytest.raises(UnsupportedCell, match=r"cuDNN's LSTM.*#110422.*TensorWrapper"):
        tb._refuse_known(fails, mode, lstm, "torch.func.jacrev")(0)
    fcn = spec.Workload(model="fcn", seed=0, task="jacobian_vectorized")
    with pytest.raises(NotImplementedError):
        tb._refuse_known(fails, mode, fcn, "torch.func.jacrev")(0)


def test_the_compile_mode_names_the_kernels_inductor_generates_on_each_device():
    assert set(tb.INDUCTOR_KERNELS) == set(spec.DEVICES)
    assert "Triton" in tb.MODE_CHOICES["compile"].format(kernels=tb.INDUCTOR_KERNELS["cuda"])
    workload = spec.Workload(model="dense", seed=0, task="backward", n_samples=8,
                             batch_size=4, warmup=0, iterations=1)
    choices = tb.prepare(workload, "compile", "cpu").choices
    assert "Inductor C++/OpenMP kernels" in choices["model"]


def test_inductors_precompiled_headers_live_in_the_temp_directory_a_process_is_given(tmp_path):
    """run_cell.py makes each cell's headers cold by giving it its own TMPDIR: that works only
    while torch puts them there (not under TORCHINDUCTOR_CACHE_DIR)."""
    code = "from torch._inductor import codecache; print(codecache._HEADER_DIR)"
    env = {**os.environ, "TMPDIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": "/nowhere"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(tmp_path) + os.sep)


def test_a_compiled_cell_records_whether_the_precompiled_headers_were_there(tmp_path,
                                                                             monkeypatch):
    from torch._inductor import codecache, config

    monkeypatch.setattr(codecache, "_HEADER_DIR", str(tmp_path / "headers"))
    assert tb._precompiled_headers().startswith("cold:")
    (tmp_path / "headers").mkdir()
    (tmp_path / "headers" / "locks").mkdir()
    assert tb._precompiled_headers().startswith("cold:")  # a directory is not a header
    (tmp_path / "headers" / "c123.h.gch").write_bytes(b"")
    assert tb._precompiled_headers().startswith("warm:")
    monkeypatch.setattr(config, "cpp_cache_precompile_headers", False)
    assert tb._precompiled_headers().startswith("off")
