"""The in-process backends (PyTorch, TensorFlow: installed in the test Python), every model,
task and mode on a tiny workload, as the conformance test of tests/isolated.py checks the
others: every cell either runs and matches the float64 reference with the timed quantities
of the spec, or is refused exactly as the backend's CAPABILITIES declare (before anything
runs, or at run time by a declared Refusal the cell's exception matches); a run-time refusal
that none of the cells it covers met is stale.  The other frameworks run in their own
environments (tests/test_backend_<framework>.py with tests/isolated.py).

torch.compile and XLA compile every model x task anew (seconds each): in the default tier
those two modes run on a representative subset of the models (SLOW_MODE_MODELS), tf.function
on every model but ResNet50, every mode on every model but the MLP of depth 2; the rest of
the study's models is the extended tier (pytest -m extended), with a few slow single cells
(SLOW_CELLS).  Every mode runs every task."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from adbench import backends, reference, spec
from adbench.backends import UnsupportedCell, blas, symbolic_graphs

from conftest import REPO, at_one_thread
from isolated import BACKEND_TEST_MODELS, pool_key_problems

pytestmark = pytest.mark.backend  # imports a framework

# Tolerances of a float32 cell against the float64 reference (relative L2, largest array):
# the pipeline's own defaults, with their reasons, from the config schema.
CHECK = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())[
    "properties"]["gradient_check"]["properties"]
TOLERANCES = {m: CHECK["models"]["default"].get(m, CHECK["tolerance"]["default"])
              for m in spec.MODELS}

# The backends this file tests, in this Python: a missing framework is a failure.
IN_PROCESS = ("torch", "tensorflow")
# Modes that compile each model x task from scratch (torch.compile: Inductor's C++ compiler,
# 2-30 s a cell here; XLA: 1-20 s): the default tier runs them on a representative subset
# (dense layers, a convolution, the slides' raw-op cell; an LSTM for torch.compile, whose
# graph break must be refused, not timed as eager).
SLOW_MODE_MODELS = {("torch", "compile"): ("mlp512", "dense", "rnn_cell", "cnn", "lstm"),
                    ("tensorflow", "xla"): ("mlp512", "dense", "rnn_cell", "cnn"),
                    # ResNet50's Jacobians in tf.function: 20-30 s a task here, the same
                    # Keras model as eager's (checked here in eager mode).
                    ("tensorflow", "graph"): tuple(m for m in spec.MODELS if m != "resnet50")}

# Run-time refusals that depend on the process, not only on the cell: TorchScript's optimised
# graph of rnn_cell fails under jacrev at the third call in a fresh process (as the pipeline
# runs a cell), but not always after other cells ran in the same process.  Such a cell may
# run here (and must then match the reference); its refusal is not called stale for that.
MAY_RUN = {("torch", "script", "rnn_cell", "jacobian_vectorized"),
           ("torch", "trace", "rnn_cell", "jacobian_vectorized")}


# Single cells of 7-13 s here left to the extended tier: each one's transform runs in the
# default tier on other models, and its model in the default tier's other tasks (the CNN's
# Jacobians under torch.compile; ResNet50's and the LSTM's batched Jacobians in eager
# TensorFlow, whose LSTM Jacobians tf.function also runs).
SLOW_CELLS = {*(("torch", "compile", "cnn", task) for task in spec.STUDY_TASKS
                if task != "backward"),
              *(("tensorflow", "eager", model, task) for model in ("resnet50", "lstm")
                for task in ("loss_jacobian", "jacobian_vectorized"))}


def in_default_tier(framework: str, mode: str, model: str, task: str) -> bool:
    return (model in BACKEND_TEST_MODELS
            and model in SLOW_MODE_MODELS.get((framework, mode), (model,))
            and (framework, mode, model, task) not in SLOW_CELLS)


def cells() -> list:
    """Every (framework, mode, model, task) of the study, the extended tier's marked so;
    ordered so that a model and task's cells follow one another (one reference each)."""
    found = []
    for framework in IN_PROCESS:
        for model in spec.STUDY_MODELS:
            for task in sorted(spec.STUDY_TASKS):  # variants: test_variant_tasks.py
                for mode in spec.FRAMEWORKS[framework].modes:
                    marks = () if in_default_tier(framework, mode, model, task) else (
                        pytest.mark.extended,)
                    found.append(pytest.param(framework, mode, model, task, marks=marks,
                                              id=f"{framework}-{mode}-{model}-{task}"))
    return found


# What the cell tests saw in this process: the cells that ran, the run-time refusals met.
RAN: set[tuple[str, str, str, str]] = set()
MET: set[str] = set()


def tiny(model: str, task: str, seed: int = 3) -> spec.Workload:
    """A few small batches; the first 10 output rows of a Jacobian (ResNet50: two images
    and two rows): XLA unrolls the row loop, 128 rows of attention take it minutes."""
    m = spec.MODELS[model]
    return spec.Workload(model=model, seed=seed, task=task, warmup=0, iterations=2,
                         n_samples=min(m.n_samples, 8), batch_size=min(m.batch_size, 4),
                         jacobian_rows=2 if model == "resnet50" else min(10, m.n_outputs))


@functools.lru_cache(maxsize=2)
def cached_reference(model: str, task: str):
    return reference.reference_derivatives(tiny(model, task))


def compiled_graphs(framework: str, mode: str) -> int | None:
    """Graphs torch.compile has compiled in this process so far (None for other modes)."""
    if (framework, mode) != ("torch", "compile"):
        return None
    from torch._dynamo.utils import counters

    return counters["aot_autograd"]["total"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """framework -> its Backend, loaded at its first use (imports the framework: missing
    is a failure), at 1 thread; compile caches under a temporary ADBENCH_CACHE_DIR."""
    found = {}

    def load(framework: str) -> backends.Backend:
        if framework not in found:
            found[framework] = backends.load(framework)
            at_one_thread(found[framework])
        return found[framework]

    with pytest.MonkeyPatch.context() as patch:  # compile caches, as measure.py sets it
        patch.setenv("ADBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield load


@pytest.fixture(params=IN_PROCESS)
def backend(request, loaded):
    return request.param, loaded(request.param)


def test_load_makes_the_framework_backend(backend):
    """From what the package declares: its device class, CAPABILITIES, TASK_BUILDERS."""
    framework, module = backend
    package = importlib.import_module(
        f"adbench.backends.{spec.FRAMEWORKS[framework].backend}.tasks")
    assert isinstance(module, backends.Backend) and type(module) is package.DEVICE
    assert module.capabilities is backends.capabilities(framework)
    assert module.tasks is package.TASK_BUILDERS
    assert framework in module.versions() and "numpy" in module.versions()
    assert module.device_name("cpu") == "cpu"


@pytest.mark.parametrize("framework", list(spec.FRAMEWORKS))
def test_the_declaration_names_only_what_the_spec_knows(framework):
    assert backends.capabilities(framework).problems() == []


# ------------------------------------------------------------------ one task registry
def tasks_file(framework: str) -> Path:
    return BACKENDS / spec.FRAMEWORKS[framework].backend / "tasks.py"


def declared_registry(framework: str) -> set[str]:
    """The task names of a backend's TASK_BUILDERS, read from its tasks.py without importing
    it (nor its framework): the assignment's expression evaluated with the project names it
    uses (spec, symbolic_graphs, the package's declarations) and every other name (a
    builder) a placeholder."""
    path = tasks_file(framework)
    tree = ast.parse(path.read_text())
    found = [n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == "TASK_BUILDERS"
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    assert len(found) == 1, f"{path}: one TASK_BUILDERS assignment, found {len(found)}"
    package = importlib.import_module(f"adbench.backends.{spec.FRAMEWORKS[framework].backend}")
    names = {n.id: object() for n in ast.walk(found[0])
             if isinstance(n, ast.Name) and not hasattr(builtins, n.id)}
    names.update({k: v for k, v in vars(package).items() if k in names},
                 spec=spec, graphs=symbolic_graphs)
    return set(eval(compile(ast.Expression(found[0]), str(path), "eval"), names))


@pytest.mark.parametrize("framework, task", [(f, t) for f in spec.FRAMEWORKS
                                             for t in spec.TASKS])
def test_every_backend_builds_the_tasks_it_declares_and_no_other(framework, task):
    """Every backend x task of the spec: a task some cell runs (no Refusal, known before the
    run, covers every cell of it) has its builder in the backend's TASK_BUILDERS; a task
    every cell refuses has none.  Read without the framework (tests/isolated.py runs the
    cells of the frameworks not installed here, in their own environments)."""
    declared = task in backends.capabilities(framework).tasks
    assert (task in declared_registry(framework)) == declared, (
        f"{framework}: {task} is {'' if declared else 'not '}declared runnable")


def test_the_study_protocol_runs_where_the_studys_code_does():
    """The study's protocol (spec.STUDY_PROTOCOL_TASK) runs in the modes of the study's code
    (PyTorch eager and TorchScript, TensorFlow eager and tf.function) on the MLPs with the
    l2 loss, and every other (framework, mode, model) refuses it by its declaration: the
    spec's for the frameworks whose code the study does not give, the backend's for the
    rest."""
    task = spec.STUDY_PROTOCOL_TASK
    runs = {(f, mode, model) for f in spec.FRAMEWORKS for mode in spec.FRAMEWORKS[f].modes
            for model in spec.MODELS
            if backends.capabilities(f).refusal(mode, model, task, "cpu") is None}
    mlps = {m for m, info in spec.MODELS.items() if info.family == "mlp" and info.loss == "l2"}
    assert {"mlp512", "mlp354x2", "mlp294x3"} <= mlps
    assert runs == {(f, mode, model) for f, mode in (("torch", "eager"), ("torch", "script"),
                                                     ("tensorflow", "eager"),
                                                     ("tensorflow", "graph"))
                    for model in mlps}
    for framework in spec.FRAMEWORKS:
        registry = declared_registry(framework)
        assert (task in registry) == (framework in spec.TASKS[task].study_code), framework


@pytest.mark.parametrize("framework", IN_PROCESS)
def test_the_loaded_registry_is_the_one_read(loaded, framework):
    """The registry load() hands the Backend is the one declared_registry reads, and
    agrees with the declaration."""
    module = loaded(framework)
    assert set(module.tasks) == declared_registry(framework)
    assert module.capabilities.registry_problems(module.tasks) == []


@pytest.mark.parametrize("framework", list(spec.FRAMEWORKS))
def test_a_backend_declares_what_load_builds_it_from_and_no_backend_of_its_own(framework):
    """tasks.py declares DEVICE, TASK_BUILDERS and prepare, and makes no Backend itself
    (backends.load does): no class or factory at its end."""
    tree = ast.parse(tasks_file(framework).read_text())
    assigned = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"DEVICE", "TASK_BUILDERS"} <= assigned and "prepare" in functions
    assert "backend" not in functions
    assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                and n.name.endswith("Backend")]


def test_registry_problems_name_a_missing_builder_and_a_dead_one():
    capabilities = backends.capabilities("mxnet")  # refuses loss_jacobian everywhere
    registry = {t: object() for t in capabilities.tasks if t != "jacobian_rows"}
    registry["loss_jacobian"] = object()
    problems = capabilities.registry_problems(registry)
    assert len(problems) == 2
    assert "'jacobian_rows' runs in some cell but has no builder" in problems[0]
    assert "'loss_jacobian', which every cell refuses" in problems[1]


# ------------------------------------------------------------------ refusals of a float64 build
FLOAT64_REFUSALS = [("tensorflow", "ctc", "backward"), ("tensorflow", "ctc", "jacobian_rows"),
                    ("mxnet", "ctc", "backward"), ("mxnet", "ctc", spec.FORWARD_TASK)]


@pytest.mark.parametrize("framework, model, task", FLOAT64_REFUSALS)
def test_a_float64_build_is_refused_by_the_declaration_a_cell_never(framework, model, task):
    """The float64 guards are declared refusals (Refusal.dtypes): a float64 build of the
    cell is refused before it is built, the float32 timing cell runs."""
    capabilities = backends.capabilities(framework)
    mode = next(iter(spec.FRAMEWORKS[framework].modes))
    assert "float64" in capabilities.refusal(mode, model, task, "cpu", "float64")
    assert capabilities.refusal(mode, model, task, "cpu") is None
    assert "float16" in capabilities.refusal(mode, "mlp512", "backward", "cpu", "float16")


def test_prepare_refuses_a_declared_refusal_before_building(loaded):
    """Backend.prepare, the one path: the declared refusal's reason as UnsupportedCell."""
    workload = tiny("ctc", "backward")
    with pytest.raises(UnsupportedCell, match="cannot run in float64"):
        loaded("tensorflow").prepare(workload, "eager", "cpu", dtype="float64")
    with pytest.raises(UnsupportedCell, match="has no mode"):
        loaded("torch").prepare(workload, "nonsense", "cpu")


def run_cell(module, framework, mode, workload):
    """As the harness runs a cell: the timed iterations first (a mode's transform fails from
    inside run()), then the derivatives at the first batch.  Three calls in a compiled mode
    (TorchScript optimises its graph after the profiling runs; tf.function, XLA and
    torch.compile trace or compile in the first), one in an eager mode, whose every call
    runs the same code."""
    calls = 3 if spec.FRAMEWORKS[framework].modes[mode].compiled else 1
    prepared = module.prepare(workload, mode, "cpu")
    samples = [prepared.run(i, time.perf_counter) for i in range(calls)]
    loss, arrays = prepared.derivatives(0)
    return prepared, samples, loss, arrays


@pytest.mark.parametrize("framework, mode, model, task", cells())
def test_cell_conforms_to_the_declaration(loaded, framework, mode, model, task):
    """Refused before it runs as CAPABILITIES declare (never prepared), or run as measure.py
    runs it: an exception is a failure unless a declared run-time refusal matches it (prepare
    never refuses a float32 cell itself); a cell that runs matches the float64 reference."""
    capabilities = backends.capabilities(framework)
    declared = capabilities.refusal(mode, model, task, "cpu")
    if declared:  # measure.py records it unsupported before importing anything
        return
    workload = tiny(model, task)
    graphs = compiled_graphs(framework, mode)
    RAN.add((framework, mode, model, task))
    try:
        prepared, samples, loss, arrays = run_cell(loaded(framework), framework, mode,
                                                   workload)
    except Exception as exc:  # noqa: BLE001 -- a declared run-time refusal, or a failure
        assert not isinstance(exc, UnsupportedCell), f"refused, but not declared: {exc}"
        refusal = capabilities.refusal_of(mode, model, task, "cpu", exc)
        if refusal is None:
            raise
        MET.add(refusal.reason)
        return
    # torch.compile falls back to eager without a word in places (e.g. under jacrev):
    # the timed calls must have compiled a graph.
    if graphs is not None:
        assert compiled_graphs(framework, mode) > graphs, "no graph compiled"
    ref_loss, ref_arrays = cached_reference(model, task)
    assert [a.shape for a in arrays] == [r.shape for r in ref_arrays]
    assert all(a.dtype == np.float32 for a in arrays)
    assert reference.relative_error(arrays, ref_arrays) < TOLERANCES[model]
    if spec.TASKS[task].derivative == "gradients":  # one per spec parameter, its shape
        assert [a.shape for a in arrays] == [p.shape for p in workload.spec.params]
        assert loss == pytest.approx(ref_loss, rel=1e-5)
    else:
        assert [a.shape for a in arrays] == [workload.spec.jacobian_shape(
            workload.jacobian_rows)]
    for sample in samples:
        assert set(sample) == set(spec.timed_quantities(framework, mode, task))
        assert all(v > 0 for v in sample.values()), sample
        if "forward_s" in sample:
            assert sample["step_s"] == pytest.approx(sample["forward_s"] + sample["backward_s"])
    assert prepared.compile_s >= 0
    assert prepared.choices and all(isinstance(v, str) for v in prepared.choices.values())


@pytest.mark.parametrize("tier", ["default", pytest.param("extended",
                                                          marks=pytest.mark.extended)])
def test_run_time_refusals_are_met(tier):
    """After the cells above (this file runs in one process, in order): a declared run-time
    refusal that covers cells which ran here, none of which met it, is stale (the framework
    runs them now: drop it).  Cells that did not run (another tier, a -k selection) say
    nothing."""
    for framework in IN_PROCESS:
        for refusal in backends.capabilities(framework).refusals:
            covered = [c for c in RAN if c[0] == framework and c not in MAY_RUN
                       and refusal.at_run_time and refusal.covers(*c[1:], "cpu")]
            assert not covered or refusal.reason in MET, \
                f"{framework}: no cell of {sorted(covered)} met {refusal.reason!r}: drop it"


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
def test_torch_trace_serves_a_shorter_last_batch(loaded, model):
    """jit.trace records the first batch: every model's trace must run an epoch's shorter
    last batch, to eager's gradients (a batch size frozen in the trace would fail or err)."""
    torch_backend = loaded("torch")
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
        # measure.py refuses it first (a GPU's task; eager needs no dynamic-shape option)
        if module.capabilities.refusal("eager", "rnn_cell", task, "cpu"):
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


def test_unknown_mode_is_refused_by_the_declaration(backend):
    framework, module = backend
    assert "nonsense" not in module.capabilities.modes
    assert "mode" in module.capabilities.refusal("nonsense", "mlp512", "backward", "cpu")


def test_cuda_without_a_gpu_is_a_failure_not_unsupported(backend):
    """The spec gives both a CUDA path: a GPU they cannot see is a failure of the run, which
    the next run re-times (tests/test_gpu_failures.py), never `unsupported`."""
    framework, module = backend
    if framework == "torch":
        import torch

        gpu = torch.cuda.is_available()
    else:
        import tensorflow as tf

        gpu = bool(tf.config.list_physical_devices("GPU"))
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
    import torch

    from adbench.backends.torch_backend import models

    workload = tiny(model, "backward")
    net, binds = models.build(workload.spec, spec.make_params(workload),
                                     torch.device("cpu"), torch.float32)
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    assert trainable == workload.spec.n_parameters
    assert len(binds) == len([p for p in net.parameters() if p.requires_grad])


@pytest.mark.parametrize("mode", ["script", "trace", "compile"])
def test_torch_transforms_share_the_loaded_parameters(mode):
    import torch

    from adbench.backends.torch_backend import models, tasks

    workload = tiny("cnn", "backward")
    arrays = spec.make_params(workload)
    net, binds = models.build(workload.spec, arrays, torch.device("cpu"), torch.float32)
    example = spec.make_batches(workload)[0]
    example = (torch.from_numpy(example["x"]), torch.from_numpy(example["y"]))
    compiled, compile_s, _ = tasks.transform(net, mode, example)
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


BACKENDS = REPO / "workflow/scripts/adbench/backends"
BACKEND_FILES = sorted(BACKENDS.rglob("*.py"))  # the packages' files too


@pytest.mark.parametrize("path", BACKEND_FILES, ids=lambda p: str(p.relative_to(BACKENDS)))
def test_no_backend_keeps_its_own_blas_or_sync_helper(path):
    """BLAS/OpenMP pools go through backends.blas, a CPU step's sync is backends.no_sync."""
    functions, imported, no_ops = _defined_and_imported(path)
    if path.name != "blas.py":
        assert "threadpoolctl" not in imported
        assert not [f for f in functions if "blas" in f.lower()], functions
    if path != BACKENDS / "__init__.py":
        assert not [f for f in functions if "no_sync" in f], functions
        assert not no_ops, f"lambda: None at lines {no_ops}: use backends.no_sync"
