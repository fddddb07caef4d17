"""The in-process backends (PyTorch, TensorFlow: installed in the test Python), every model,
task and mode on a tiny workload: derivatives against the float64 reference, the timed
quantities of the spec, unsupported cells with a reason.  The other frameworks run in their
own environments (tests/test_backend_<framework>.py with tests/isolated.py).

torch.compile and XLA compile every model x task anew (seconds each): those two modes run on
a representative subset of the models (SLOW_MODE_MODELS) to keep this file to a few minutes;
every mode runs every task."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from adbench import backends, reference, spec
from adbench.backends import UnsupportedCell, blas

from conftest import REPO, at_one_thread
from isolated import BACKEND_TEST_MODELS, pool_key_problems

# Tolerances of a float32 cell against the float64 reference (relative L2, largest array):
# the pipeline's own defaults, with their reasons, from the config schema.
CHECK = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())[
    "properties"]["gradient_check"]["properties"]
TOLERANCES = {m: CHECK["models"]["default"].get(m, CHECK["tolerance"]["default"])
              for m in spec.MODELS}

# The backends this file tests, in this Python: a missing framework is a failure.
IN_PROCESS = ("torch", "tensorflow")
# Modes that compile each model x task from scratch (torch.compile: Inductor's C++ compiler,
# 2-30 s a cell here; XLA: 1-20 s): run on a representative subset (dense layers, a
# convolution, the slides' raw-op cell; an LSTM for torch.compile, whose graph break must be
# refused, not timed as eager).  The other models were run by hand in both modes (torch
# 2.13, TF 2.21): KNOWN_UNSUPPORTED lists what they refuse.
SLOW_MODE_MODELS = {("torch", "compile"): ("mlp512", "dense", "rnn_cell", "cnn", "lstm"),
                    ("tensorflow", "xla"): ("mlp512", "dense", "rnn_cell", "cnn"),
                    # ResNet50's Jacobians in tf.function: 20-30 s a task here, the same
                    # Keras model as eager's (checked here in eager mode); the paper config's
                    # tf.function cells of every ResNet50 task pass the gradient check.
                    ("tensorflow", "graph"): tuple(m for m in spec.MODELS if m != "resnet50")}

# The cells a backend refuses, (framework, mode, model, task) with "*" for any, and a phrase
# of the reason it must give. Any other refusal fails: nothing is dropped unnoticed.
KNOWN_UNSUPPORTED = {
    # torch.func's stateless API does not accept a TorchScript module (scripted or traced).
    ("torch", "script", "*", "loss_jacobian"): "stateless API",
    ("torch", "trace", "*", "loss_jacobian"): "stateless API",
    # torch.func.jacrev cannot transform TorchScript's optimised graph of the raw-op cell
    # (its third call, after the profiling runs, reads `.data` under vmap).
    ("torch", "script", "rnn_cell", "jacobian_vectorized"): "jacrev",
    ("torch", "trace", "rnn_cell", "jacobian_vectorized"): "jacrev",
    # Dynamo does not trace nn.LSTM: the Jacobians of the model alone compile no graph.
    ("torch", "compile", "lstm", "jacobian_rows"): "compiled no graph",
    ("torch", "compile", "lstm", "jacobian_vectorized"): "compiled no graph",
    # Inductor would need the derivative of CPU flash attention's backward (not in SLOW_MODE_
    # MODELS; measured by hand).
    ("torch", "compile", "attention", "jacobian_vectorized"): "flash attention",
    # TF 2.21's oneDNN matmul aborts the process on a shape pfor makes of MultiHeadAttention
    # (XLA compiles that matmul itself: the xla cell runs).
    ("tensorflow", "eager", "attention", "jacobian_vectorized"): "oneDNN",
    ("tensorflow", "graph", "attention", "jacobian_vectorized"): "oneDNN",
    # XLA has no kernel for the TensorList ops of pfor over Keras' LSTM while_loop (measured
    # by hand: 12 s a cell before XLA refuses, so not in SLOW_MODE_MODELS).
    ("tensorflow", "xla", "lstm", "jacobian_vectorized"): "TensorListReserve",
    ("tensorflow", "xla", "lstm", "loss_jacobian"): "TensorListReserve",
}

# Known refusals that depend on the process, not only on the cell: TorchScript's optimised
# graph of rnn_cell fails under jacrev at the third call in a fresh process (as the pipeline
# runs a cell), but not always after other cells ran in the same process; the oneDNN one
# depends on TF_ENABLE_ONEDNN_OPTS.
MAY_RUN = {("torch", "script", "rnn_cell", "jacobian_vectorized"),
           ("torch", "trace", "rnn_cell", "jacobian_vectorized"),
           ("tensorflow", "eager", "attention", "jacobian_vectorized"),
           ("tensorflow", "graph", "attention", "jacobian_vectorized")}


def known_reason(framework, mode, model, task):
    for key, phrase in KNOWN_UNSUPPORTED.items():
        if all(k in ("*", v) for k, v in zip(key, (framework, mode, model, task))):
            return phrase
    return None


def tiny(model: str, task: str, seed: int = 3) -> spec.Workload:
    """A few small batches; the first 10 output rows of a Jacobian (ResNet50: two images
    and two rows): XLA unrolls the row loop, 128 rows of attention take it minutes."""
    m = spec.MODELS[model]
    return spec.Workload(model=model, seed=seed, task=task, warmup=0, iterations=2,
                         n_samples=min(m.n_samples, 8), batch_size=min(m.batch_size, 4),
                         jacobian_rows=2 if model == "resnet50" else min(10, m.n_outputs))


def modes(framework: str, model: str) -> list[str]:
    return [mode for mode in spec.FRAMEWORKS[framework].modes
            if model in SLOW_MODE_MODELS.get((framework, mode), (model,))]


def compiled_graphs(framework: str, mode: str) -> int | None:
    """Graphs torch.compile has compiled in this process so far (None for other modes)."""
    if (framework, mode) != ("torch", "compile"):
        return None
    from torch._dynamo.utils import counters

    return counters["aot_autograd"]["total"]


@pytest.fixture(scope="module", params=IN_PROCESS)
def backend(request, tmp_path_factory):
    module = backends.load(request.param)  # imports the framework: missing is a failure
    at_one_thread(module)
    with pytest.MonkeyPatch.context() as patch:  # compile caches, as measure.py sets it
        patch.setenv("ADBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield request.param, module


def test_load_imports_the_framework_backend(backend):
    framework, module = backend
    assert module.__name__ == f"adbench.backends.{spec.FRAMEWORKS[framework].backend}"
    assert framework in module.versions() and "numpy" in module.versions()
    assert module.device_name("cpu") == "cpu"


@pytest.mark.parametrize("task", sorted(spec.STUDY_TASKS))  # variants: test_variant_tasks.py
@pytest.mark.parametrize("model", BACKEND_TEST_MODELS)
def test_derivatives_match_the_float64_reference(backend, model, task):
    """As the harness runs a cell: the timed iterations first (a known failure of a mode's
    transform is refused from inside run()), then the derivatives at the first batch."""
    framework, module = backend
    workload = tiny(model, task)
    ref_loss, ref_arrays = reference.reference_derivatives(workload)
    for mode in modes(framework, model):
        graphs = compiled_graphs(framework, mode)
        # Three calls in a compiled mode (TorchScript optimises its graph after the profiling
        # runs; tf.function, XLA and torch.compile trace or compile in the first), one in an
        # eager mode, whose every call runs the same code.
        calls = 3 if spec.FRAMEWORKS[framework].modes[mode].compiled else 1
        try:
            prepared = module.prepare(workload, mode, "cpu")
            samples = [prepared.run(i, time.perf_counter) for i in range(calls)]
            loss, arrays = prepared.derivatives(0)
        except UnsupportedCell as why:
            phrase = known_reason(framework, mode, model, task)
            assert phrase and phrase in str(why), f"unexpected refusal in {mode}: {why}"
            continue
        # torch.compile falls back to eager without a word in places (e.g. under jacrev):
        # the timed calls must have compiled a graph.
        if graphs is not None:
            assert compiled_graphs(framework, mode) > graphs, f"{mode}: no graph compiled"
        known = known_reason(framework, mode, model, task)
        assert known is None or (framework, mode, model, task) in MAY_RUN, \
            f"{mode} runs now: drop the known refusal {known!r}"
        assert [a.shape for a in arrays] == [r.shape for r in ref_arrays], mode
        assert all(a.dtype == np.float32 for a in arrays), mode
        error = reference.relative_error(arrays, ref_arrays)
        assert error < TOLERANCES[model], (mode, error)
        if spec.TASKS[task].derivative == "gradients":  # one per spec parameter, its shape
            assert [a.shape for a in arrays] == [p.shape for p in workload.spec.params], mode
            assert loss == pytest.approx(ref_loss, rel=1e-5), mode
        else:
            assert [a.shape for a in arrays] == [workload.spec.jacobian_shape(
                workload.jacobian_rows)], mode
        for sample in samples:
            assert set(sample) == set(spec.timed_quantities(framework, mode, task)), mode
            assert all(v > 0 for v in sample.values()), (mode, sample)
            if "forward_s" in sample:
                assert sample["step_s"] == pytest.approx(sample["forward_s"]
                                                         + sample["backward_s"])
        assert prepared.compile_s >= 0
        assert prepared.choices and all(isinstance(v, str) for v in prepared.choices.values())


def test_derivatives_follow_the_batch_and_carry_no_state(backend):
    """Iteration 1 uses the second batch; computing again gives the same (no accumulated .grad)."""
    framework, module = backend
    prepared = module.prepare(tiny("mlp512", "backward"), "eager", "cpu")
    _, first = prepared.derivatives(0)
    _, second = prepared.derivatives(1)
    assert not np.allclose(first[0], second[0])
    _, again = prepared.derivatives(0)
    assert all(np.allclose(a, b, rtol=1e-6) for a, b in zip(first, again))


def test_a_whole_epoch_wraps_around(backend):
    """Three batches, the last one short (a traced graph must not have frozen the batch
    size; compiled modes recompile once), then the first batch again."""
    framework, module = backend
    workload = spec.Workload(model="mlp512", seed=0, n_samples=300, batch_size=128, warmup=0,
                             iterations=4)
    for mode in spec.FRAMEWORKS[framework].modes:
        prepared = module.prepare(workload, mode, "cpu")
        for i in range(workload.n_batches + 1):
            assert prepared.run(i, time.perf_counter)["step_s"] > 0, mode


@pytest.mark.parametrize("model", [m for m in spec.MODELS if spec.MODELS[m].batch_size > 1])
def test_torch_trace_serves_a_shorter_last_batch(model):
    """jit.trace records the first batch: every model's trace must run an epoch's shorter
    last batch, to eager's gradients (a batch size frozen in the trace would fail or err)."""
    from adbench.backends import torch_backend

    size = 2 if model == "resnet50" else min(spec.MODELS[model].batch_size, 4)
    workload = spec.Workload(model=model, seed=1, task="backward", warmup=0, iterations=2,
                             n_samples=2 * size - 1, batch_size=size)
    prepared = torch_backend.prepare(workload, "trace", "cpu")
    for i in range(workload.n_batches):
        assert prepared.run(i, time.perf_counter)["step_s"] > 0
    loss, arrays = prepared.derivatives(1)
    eager_loss, eager = torch_backend.prepare(workload, "eager", "cpu").derivatives(1)
    assert arrays[0].shape == eager[0].shape
    assert loss == pytest.approx(eager_loss, rel=1e-5)
    assert reference.relative_error(arrays, eager) < 1e-5


def test_choices_are_recorded(backend):
    framework, module = backend
    for task in spec.TASKS:
        if spec.task_refusal(framework, task, "cpu"):  # measure.py refuses it first
            continue
        if spec.TASKS[task].sequence == "dynamic":  # eager needs no dynamic-shape option
            with pytest.raises(UnsupportedCell, match="dynamic"):
                module.prepare(tiny("rnn_cell", task), "eager", "cpu")
            continue
        prepared = module.prepare(tiny("rnn_cell", task), "eager", "cpu")
        assert prepared.choices and all(isinstance(v, str) for v in prepared.choices.values())


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_set_and_reported_in_a_fresh_process(backend, threads):
    """As a timing job does it: before the framework's first op, then read back."""
    framework, _ = backend
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]);"
            "from adbench.backends import load;"
            f"print(json.dumps(load({framework!r}).configure_threads({threads})))")
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "workflow" / "scripts")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout.strip().splitlines()[-1])
    assert reported and all(int(v) == threads for v in reported.values()), reported
    assert not pool_key_problems(reported), reported


def test_unknown_mode_is_unsupported(backend):
    framework, module = backend
    with pytest.raises(UnsupportedCell, match="mode"):
        module.prepare(tiny("mlp512", "backward"), "nonsense", "cpu")


def test_cuda_without_a_gpu_is_a_failure_not_unsupported(backend):
    """The spec gives both a CUDA path: a GPU they cannot see is a failure of the run, which
    the next run re-times (tests/test_gpu_failures.py), never `unsupported`."""
    framework, module = backend
    if framework == "torch":
        gpu = module.torch.cuda.is_available()
    else:
        gpu = bool(module.tf.config.list_physical_devices("GPU"))
    if gpu:
        pytest.skip("a GPU is visible: the cuda cell is supported here")
    with pytest.raises(backends.DeviceNotVisible, match=f"{framework} sees no GPU"):
        module.prepare(tiny("mlp512", "backward"), "eager", "cuda")


# ------------------------------------------------------------------ compiled modes
FIRST_CALL_COMPILES = [("torch", "compile"), ("tensorflow", "graph"), ("tensorflow", "xla")]
AHEAD_OF_TIME = [("torch", "script"), ("torch", "trace")]


@pytest.mark.parametrize("framework, mode", FIRST_CALL_COMPILES)
@pytest.mark.parametrize("task", ["backward", "jacobian_rows"])
def test_a_lazy_compile_is_the_first_timed_iteration(framework, mode, task, tmp_path,
                                                     monkeypatch):
    """Nothing calls the step before the timed loop: the first timed iteration pays the
    compilation, visibly (a wide margin over a later step), and compile_s stays 0."""
    monkeypatch.setenv("ADBENCH_CACHE_DIR", str(tmp_path))
    module = backends.load(framework)
    prepared = module.prepare(tiny("mlp512", task), mode, "cpu")
    assert prepared.compile_s == 0
    steps = [prepared.run(i, time.perf_counter)["step_s"] for i in range(4)]
    assert steps[0] > 2 * min(steps[2:]), steps
    if framework == "torch":  # the Inductor cache is cold, under ADBENCH_CACHE_DIR/torch
        caches = list((tmp_path / "torch").glob("inductor-*"))
        assert len(caches) == 1 and any(caches[0].rglob("*")), caches
        assert prepared.choices["inductor_cache"].startswith("cold")


@pytest.mark.parametrize("framework, mode", AHEAD_OF_TIME)
@pytest.mark.parametrize("task", list(spec.STUDY_TASKS))
def test_ahead_of_time_compilation_is_compile_s(framework, mode, task):
    module = backends.load(framework)
    assert module.prepare(tiny("cnn", task), mode, "cpu").compile_s > 0
    assert module.prepare(tiny("cnn", task), "eager", "cpu").compile_s == 0


# ------------------------------------------------------------------ PyTorch specifics
@pytest.mark.parametrize("model", list(spec.STUDY_MODELS))
def test_torch_models_train_exactly_the_spec_parameters(model):
    from adbench.backends import torch_backend

    torch = torch_backend.torch
    workload = tiny(model, "backward")
    net, binds = torch_backend.build(workload.spec, spec.make_params(workload),
                                     torch.device("cpu"), torch.float32)
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    assert trainable == workload.spec.n_parameters
    assert len(binds) == len([p for p in net.parameters() if p.requires_grad])


@pytest.mark.parametrize("mode", ["script", "trace", "compile"])
def test_torch_transforms_share_the_loaded_parameters(mode):
    from adbench.backends import torch_backend

    torch = torch_backend.torch
    workload = tiny("cnn", "backward")
    arrays = spec.make_params(workload)
    net, binds = torch_backend.build(workload.spec, arrays, torch.device("cpu"),
                                     torch.float32)
    example = spec.make_batches(workload)[0]
    example = (torch.from_numpy(example["x"]), torch.from_numpy(example["y"]))
    compiled, compile_s, _ = torch_backend.transform(net, mode, example)
    if mode != "compile":
        assert isinstance(compiled, torch.jit.ScriptModule) and compile_s > 0
    shared = {id(p) for p in compiled.parameters()}
    assert all(id(p) in shared for p, _, _ in binds)
    assert np.array_equal(binds[0][0].detach().numpy(), arrays[0])


# ------------------------------------------------------------------ the backends' shared layer
SITE = "/home/someone/.venvs/any/lib/python3.11/site-packages"


@pytest.mark.parametrize("internal_api, filepath, key", [
    ("openblas", f"{SITE}/numpy.libs/libscipy_openblas64_-32a4b2a6.so", "openblas:numpy"),
    ("openblas", f"{SITE}/scipy.libs/libopenblasp-r0-23e5df77.3.21.dev.so", "openblas:scipy"),
    ("openblas", f"{SITE}/mxnet/libopenblas.so.0", "openblas:mxnet"),
    ("openmp", f"{SITE}/torch/lib/libgomp-a34b3233.so.1", "openmp:torch"),
    ("openmp", "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "openmp:libgomp"),
    ("openmp", "/opt/conda/envs/x/lib/libgomp.so.1", "openmp:libgomp"),
])
def test_a_pool_is_keyed_by_its_api_and_owner_not_its_path(internal_api, filepath, key):
    """The same library on another machine, in another folder or build, has the same key."""
    assert blas.pool_key(internal_api, filepath) == key
    assert not pool_key_problems({key: 1})


def test_pools_sharing_a_key_are_all_recorded():
    """Two OpenMP runtimes of one package (and numpy's and scipy's OpenBLAS, whose file
    names share threadpoolctl's prefix) each keep their thread count."""
    libraries = [
        {"internal_api": "openblas", "num_threads": 1,
         "filepath": f"{SITE}/numpy.libs/libopenblas64_p-r0-742d56dc.3.20.so"},
        {"internal_api": "openblas", "num_threads": 2,
         "filepath": f"{SITE}/scipy.libs/libopenblasp-r0-23e5df77.3.21.dev.so"},
        {"internal_api": "openmp", "num_threads": 3, "filepath": f"{SITE}/torch/lib/libgomp.so.1"},
        {"internal_api": "openmp", "num_threads": 4, "filepath": f"{SITE}/torch/lib/libiomp5.so"},
    ]
    pools = blas.pool_threads(libraries)
    assert pools == {"openblas:numpy": 1, "openblas:scipy": 2, "openmp:torch": 3,
                     "openmp:torch/libiomp5": 4}
    assert not pool_key_problems(pools)


def _defined_and_imported(path) -> tuple[set[str], set[str], list[int]]:
    """A module's function names, top-level imported modules and no-op lambdas' lines."""
    tree = ast.parse(path.read_text())
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    no_ops = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Lambda) and not n.args.args
              and isinstance(n.body, ast.Constant) and n.body.value is None]
    return functions, imported, no_ops


BACKEND_FILES = sorted((REPO / "workflow/scripts/adbench/backends").glob("*.py"))


@pytest.mark.parametrize("path", BACKEND_FILES, ids=lambda p: p.name)
def test_no_backend_keeps_its_own_blas_or_sync_helper(path):
    """BLAS/OpenMP pools go through backends.blas, a CPU step's sync is backends.no_sync."""
    functions, imported, no_ops = _defined_and_imported(path)
    if path.name != "blas.py":
        assert "threadpoolctl" not in imported
        assert not [f for f in functions if "blas" in f.lower()], functions
    if path.name != "__init__.py":
        assert not [f for f in functions if "no_sync" in f], functions
        assert not no_ops, f"lambda: None at lines {no_ops}: use backends.no_sync"
