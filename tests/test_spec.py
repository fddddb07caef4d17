"""adbench.spec: the grid, the file layout, the models, data, weights, reference gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from adbench import report_spec, spec

from conftest import REPO

GRID = {
    "frameworks": {"torch": ["eager", "script", "graph"], "tensorflow": ["graph"]},
    "models": ["mlp512", "mlp294x3"],
    "tasks": ["backward"],
    "devices": ["cpu", "cuda"],
    "threads": [1, 4],
    "seeds": [0, 1],
}


# ------------------------------------------------------------------ grid
def test_expand_grid_keeps_only_valid_pairs_in_stable_order():
    cells = list(spec.expand_grid(GRID))
    pairs = [(c.framework, c.mode) for c in cells]
    assert ("torch", "graph") not in pairs  # graph is a TensorFlow mode
    assert list(dict.fromkeys(pairs)) == [("torch", "eager"), ("torch", "script"),
                                          ("tensorflow", "graph")]
    assert len(cells) == 3 * 2 * 1 * 2 * 2 * 2
    assert cells == list(spec.expand_grid(GRID))
    # itertools.product order: the seed varies fastest, the (framework, mode) pair slowest.
    assert [c.seed for c in cells[:4]] == [0, 1, 0, 1]
    assert [c.threads for c in cells[:4]] == [1, 1, 4, 4]
    assert cells[0] == spec.Cell("torch", "eager", "mlp512", "backward", "cpu", 1, 0)
    assert cells[-1] == spec.Cell("tensorflow", "graph", "mlp294x3", "backward", "cuda", 4, 1)


def test_expand_grid_casts_threads_and_seeds_to_int():
    grid = {**GRID, "threads": [np.int64(2)], "seeds": [np.int64(7)]}
    cell = next(spec.expand_grid(grid))
    assert type(cell.threads) is int and type(cell.seed) is int
    assert cell.raw_path.endswith("/t2/seed7.parquet")


def test_config_grids_fill_what_a_grid_leaves_out_and_every_grid_overrides_it():
    short = {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0]}
    full = {**short, "tasks": ["jacobian_rows"], "devices": ["cuda"], "threads": [4]}
    # A single grid may be written as a mapping.
    assert spec.config_grids({"grid": short}) == [{**short, **spec.GRID_DEFAULTS}]
    assert spec.config_grids({"grid": [short, full]}) == [{**short, **spec.GRID_DEFAULTS}, full]
    assert spec.config_grids({"grid": [short, full], "every_grid": {"seeds": [1, 2]}}) == [
        {**short, **spec.GRID_DEFAULTS, "seeds": [1, 2]}, {**full, "seeds": [1, 2]}]


def test_config_cells_are_the_union_of_its_grids_each_once_in_grid_order():
    one = {"frameworks": {"torch": ["eager"]}, "models": ["mlp512"], "seeds": [0, 1]}
    two = {**one, "seeds": [1, 2]}
    cells = spec.config_cells({"grid": [one, two]})
    assert [c.seed for c in cells] == [0, 1, 2]
    assert {(c.task, c.device, c.threads) for c in cells} == {("backward", "cpu", 1)}


def test_invalid_pairs_name_the_key_and_the_bad_value():
    assert spec.invalid_pairs({"torch": ["eager", "script"], "tensorflow": ["eager"]}) == []
    problems = spec.invalid_pairs({"torch": ["eager", "graph"], "caffe": ["jit"]})
    assert len(problems) == 2
    mode_msg, framework_msg = problems
    assert "grid.frameworks.torch" in mode_msg and "'graph'" in mode_msg
    assert "eager" in mode_msg and "script" in mode_msg  # the valid choices
    assert "grid.frameworks" in framework_msg and "'caffe'" in framework_msg


# ------------------------------------------------------------------ paths
CELL = spec.Cell("tensorflow", "graph", "mlp354x2", "backward", "cuda", 8, 12)


def test_a_cells_paths_are_its_human_index():
    # Relative to a results tree (results/, or the config's `results` folder).
    assert CELL.raw_path == "raw/cuda/tensorflow/graph/mlp354x2/backward/t8/seed12.parquet"
    assert CELL.gradient_path == "gradients/cuda/tensorflow/graph/mlp354x2/backward/t8/seed12.npz"


def test_a_cell_description_round_trips_whole_through_json():
    description = spec.CellDescription(CELL, spec.Workload("mlp354x2", 12, "backward",
                                                           iterations=7, n_samples=256))
    assert spec.CellDescription.from_json(description.to_json()) == description
    assert spec.CellDescription.from_dict(description.as_dict()) == description
    # the model's defaults fill what the workload leaves out, and are written out whole
    assert description.as_dict()["workload"]["batch_size"] == 128
    assert set(description.as_dict()["workload"]) >= set(spec.WORKLOAD_SIZES)
    assert spec.CellDescription.of("tensorflow", "graph", "mlp354x2", device="cuda",
                                   threads=8, seed=12, iterations=7,
                                   n_samples=256) == description


@pytest.mark.parametrize("change, named", [
    ({"cell": {"mode": "xla"}}, "cell.mode: 'xla' is not a torch mode"),
    ({"cell": {"framework": "caffe"}}, "cell.framework: unknown framework 'caffe'"),
    ({"cell": {"device": "tpu"}}, "cell.device: unknown device 'tpu'"),
    ({"cell": {"threads": 0}}, "cell.threads: 0 is not a whole number >= 1"),
    ({"workload": {"seed": 3}}, "workload.seed: 3 is not the cell's 0"),
    ({"workload": {"iterations": 0}}, "workload.iterations: 0"),
    ({"workload": {"warmup": -1}}, "workload.warmup: -1"),
    ({"workload": {"colour": "red"}}, r"workload: unknown key\(s\) \['colour'\]"),
    ({"workload": {"model": "vgg"}}, "workload.model: unknown model 'vgg'"),
])
def test_a_bad_cell_description_is_refused_naming_its_key(change, named):
    good = spec.CellDescription.of("torch", "eager", "mlp512").as_dict()
    bad = {part: {**good[part], **change.get(part, {})} for part in good}
    with pytest.raises(ValueError, match=named):
        spec.CellDescription.from_dict(bad)
    with pytest.raises(ValueError, match="keys"):
        spec.CellDescription.from_dict({"cell": good["cell"]})


# ------------------------------------------------------------------ models
def test_parameter_counts_of_the_three_mlps():
    counts = {name: spec.MODELS[name].n_parameters for name in spec.MLPS}
    assert counts == {"mlp512": 407050, "mlp354x2": 407110, "mlp294x3": 407200}
    # The study's published counts are the weight matrices alone, without biases.
    for name in spec.MLPS:
        weights = [p for p in spec.MODELS[name].params if p.name.endswith(".weight")]
        assert sum(p.size for p in weights) == report_spec.MODEL_TEXT[name].study_parameters


def test_resnet50_has_torchvisions_parameter_count():
    assert spec.MODELS["resnet50"].n_parameters == 25_557_032


def test_every_model_states_its_source_choices_and_derivative_shapes():
    for name, model in spec.MODELS.items():
        words = report_spec.MODEL_TEXT[name]
        assert words.source and words.choices and words.label, name
        assert model.reference in ("numpy", *spec.FRAMEWORKS), name
        rows = model.n_jacobian_rows
        assert 1 <= rows <= model.n_outputs
        assert model.jacobian_shape() == (rows, *model.input_shape)
        assert len({p.name for p in model.params}) == len(model.params), name


def test_every_table_names_known_models_tasks_and_quantities():
    for table in report_spec.TABLES:
        assert set(table.models) <= set(spec.MODELS), table.name
        assert set(table.tasks) <= set(spec.TASKS), table.name
        assert table.quantity in ("forward_s", "backward_s", "step_s")
    assert len(set(report_spec.TABLE_NAMES)) == len(report_spec.TABLES)
    covered = {(m, t) for table in report_spec.TABLES for m in table.models for t in table.tasks}
    assert {m for m, _ in covered} == set(spec.STUDY_MODELS)
    assert {t for _, t in covered} == set(spec.STUDY_TASKS)


def test_timed_quantities_split_only_what_the_clock_can_separate():
    assert spec.timed_quantities("torch", "eager", "backward") == (
        "forward_s", "backward_s", "step_s")
    assert spec.timed_quantities("torch", "script", "jacobian_rows") == (
        "forward_s", "backward_s", "step_s")
    assert spec.timed_quantities("tensorflow", "graph", "backward") == ("step_s",)
    for framework, info in spec.FRAMEWORKS.items():
        for mode in info.modes:
            assert spec.timed_quantities(framework, mode, "jacobian_vectorized") == ("step_s",)


# ------------------------------------------------------------------ data and weights
def small(seed=0, **kw):
    return spec.Workload(model="mlp512", seed=seed, **{"n_samples": 300, "batch_size": 128,
                                                        "warmup": 1, "iterations": 2, **kw})


def test_data_is_deterministic_per_seed_float32_with_one_hot_labels():
    d, d2, d3 = (spec.make_data(small(seed=s)) for s in (5, 5, 6))
    assert np.array_equal(d["x"], d2["x"]) and np.array_equal(d["y"], d2["y"])
    assert not np.array_equal(d["x"], d3["x"]) and not np.array_equal(d["y"], d3["y"])
    x, y = d["x"], d["y"]
    assert x.dtype == y.dtype == np.float32
    assert x.shape == (300, 784) and y.shape == (300, 10)
    assert 0.0 <= x.min() and x.max() < 1.0
    assert set(np.unique(y)) == {0.0, 1.0}
    assert np.all(y.sum(axis=1) == 1.0)


def test_first_rows_do_not_depend_on_how_many_rows_a_job_needs():
    short, long = spec.make_data(small(n_samples=60000)), spec.make_data(small(n_samples=300))
    for key in short:
        assert np.array_equal(short[key][:128], long[key][:128]), key


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_every_model_gets_data_of_its_shapes(model):
    m = spec.MODELS[model]
    workload = spec.Workload(model=model, seed=0, n_samples=4, batch_size=2, warmup=0,
                             iterations=1)
    data = spec.make_data(workload)
    assert data["x"].shape[1:] == m.input_shape and data["x"].dtype == np.float32
    if m.loss == "l2":
        assert data["y"].shape[1:] == m.output_shape
    if m.loss in ("xent", "ctc"):
        assert data["y"].dtype == np.int64 and data["y"].min() >= (1 if m.loss == "ctc" else 0)
    if m.family == "rnn_cell":
        assert data["h0"].shape == (len(data["x"]), m.arch["hidden"])
    params = spec.make_params(workload)
    assert [a.shape for a in params] == [p.shape for p in m.params]
    assert all(a.dtype == np.float32 for a in params)


def test_params_are_deterministic_per_seed_float32_glorot_and_zero_bias():
    p5, p5b, p6 = (spec.make_params(small(seed=s)) for s in (5, 5, 6))
    sizes = spec.MODELS["mlp512"].arch["sizes"]
    assert [a.shape for a in p5] == [(784, 512), (512,), (512, 10), (10,)]
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        w, b = p5[2 * i], p5[2 * i + 1]
        assert np.array_equal(w, p5b[2 * i]) and not np.array_equal(w, p6[2 * i])
        assert np.all(b == 0)
        assert np.abs(w).max() <= np.sqrt(6.0 / (fan_in + fan_out))


def test_full_epoch_batches_and_rows_needed():
    epoch = spec.Workload(model="mlp512", seed=0)  # 60000 rows, batch 128, 5 + 469 iterations
    assert epoch.n_batches == 469
    assert epoch.batch_bounds(0) == (0, 128)
    lo, hi = epoch.batch_bounds(468)
    assert (lo, hi) == (468 * 128, 60000) and hi - lo == 96
    assert epoch.batch_bounds(469) == (0, 128)  # the next epoch starts over
    assert epoch.rows_needed() == 60000


def test_jacobian_tasks_use_one_example_per_iteration():
    workload = spec.Workload(model="cnn", seed=0, task="jacobian_rows", warmup=1, iterations=2)
    batches = spec.make_batches(workload)
    assert len(batches) == 3 and all(len(b["x"]) == 1 for b in batches)
    assert spec.Workload(model="cnn", seed=0, task="loss_jacobian").rows_per_batch == 128


def test_short_runs_generate_only_the_rows_they_touch():
    assert small(n_samples=60000).rows_needed() == 3 * 128  # 1 warm-up + 2 measured batches
    assert small(n_samples=300, iterations=10).rows_needed() == 300  # wraps: the whole set
    assert len(spec.make_data(small(n_samples=60000))["x"]) == 3 * 128


def test_workload_defaults_are_the_models():
    assert spec.Workload(model="mlp512", seed=0).batch_size == 128
    rnn = spec.Workload(model="rnn_cell", seed=0)
    assert (rnn.batch_size, rnn.jacobian_rows) == (1, 20)
    assert spec.Workload(model="resnet50", seed=0).jacobian_rows == 10
    assert spec.Workload(model="resnet50", seed=0, jacobian_rows=3).jacobian_rows == 3


def test_make_batches_are_the_epochs_slices_in_order():
    full = spec.Workload(model="mlp512", seed=1, warmup=10, iterations=469)
    batches = spec.make_batches(full)
    assert len(batches) == 469 and len(batches[-1]["x"]) == 96
    data = spec.make_data(full)
    for key in ("x", "y"):
        assert np.array_equal(np.concatenate([b[key] for b in batches]), data[key])
    short = spec.Workload(model="mlp512", seed=1, warmup=2, iterations=3)
    assert len(spec.make_batches(short)) == 5


def test_every_model_and_task_is_in_a_table_of_every_framework():
    """Tables of the study's frameworks aside, every cell of a study task of any framework
    has a table; a variant task's cells are judged by a claim against the task they vary
    (tests/test_verdicts.py), not tabled (yet)."""
    covered = {(m, t) for table in report_spec.TABLES if table.frameworks is None
               for m in table.models for t in table.tasks}
    assert covered == set(itertools.product(spec.STUDY_MODELS, spec.STUDY_TASKS))
    assert all(t.layout == "rows" for t in report_spec.TABLES if t.frameworks is None)


def test_every_framework_has_its_pins_and_its_backend_module():
    for name, info in spec.FRAMEWORKS.items():
        assert (REPO / "envs" / f"{info.env}.yaml").exists(), name
        package = REPO / "workflow/scripts/adbench/backends" / info.backend
        assert (package / "__init__.py").exists() or package.with_suffix(".py").exists(), name
        assert info.modes


def test_the_report_spec_words_every_framework_mode_task_and_model_and_nothing_else():
    assert report_spec.FRAMEWORK_TEXT.keys() == spec.FRAMEWORKS.keys()
    for name, info in spec.FRAMEWORKS.items():
        modes = report_spec.FRAMEWORK_TEXT[name].modes
        assert modes.keys() == info.modes.keys(), name
        assert all(m.label and m.description for m in modes.values()), name
    assert report_spec.TASK_TEXT.keys() == spec.TASKS.keys()
    assert report_spec.MODEL_TEXT.keys() == spec.MODELS.keys()
    assert report_spec.LOSS_TEXT.keys() == set(spec.LOSSES)
    assert report_spec.SEQUENCE_TEXT.keys() == set(spec.SEQUENCE_STRATEGIES)


def test_cuda_cells_only_for_frameworks_with_a_cuda_build():
    grid = {"frameworks": {f: list(i.modes)[:1] for f, i in spec.FRAMEWORKS.items()},
            "models": ["mlp512"], "tasks": ["backward"], "devices": ["cpu", "cuda"],
            "threads": [1], "seeds": [0]}
    cells = list(spec.expand_grid(grid))
    with_cuda = {f for f, i in spec.FRAMEWORKS.items() if i.cuda_env}
    assert {c.framework for c in cells if c.device == "cuda"} == with_cuda
    assert {c.framework for c in cells if c.device == "cpu"} == set(spec.FRAMEWORKS)
    assert {"torch", "tensorflow", "jax"} <= with_cuda
    skipped = spec.devices_without_a_path(grid)
    assert skipped == [f"{f} on cuda" for f in spec.FRAMEWORKS if f not in with_cuda]


def test_a_cells_environment_follows_its_device():
    torch = spec.FRAMEWORKS["torch"]
    assert torch.env_for("cpu") == "torch" and torch.env_for("cuda") == "torch-cuda"
    theano = spec.FRAMEWORKS["theano"]
    assert theano.devices == ("cpu",) and theano.env_for("cpu") == "theano"


# ------------------------------------------------------------------ variant tasks (issue 26)
def test_a_variant_task_varies_a_study_task_and_the_study_tasks_are_the_others():
    for name, task in spec.TASKS.items():
        if name == spec.FORWARD_TASK:  # the forward alone: no derivative, not the study's
            assert task.variant_of is None and task.derivative == "loss"
            assert name not in spec.STUDY_TASKS and not task.separable
            continue
        if task.study_code:  # the study's code as written: not one of its experiments
            assert task.variant_of is None and name not in spec.STUDY_TASKS
            continue
        assert (task.variant_of in spec.STUDY_TASKS) == (name not in spec.STUDY_TASKS), name
    assert spec.STUDY_TASKS == ("backward", "jacobian_rows", "jacobian_vectorized",
                                "loss_jacobian")
    assert spec.TASKS["backward_frozen"].frozen and not spec.TASKS["backward"].frozen
    assert spec.TASKS["backward_retained"].variant_of == "backward"


def test_the_default_allocator_task_leaves_out_the_memory_policy_alone():
    """004's memory grab: the task runs a framework's GPU allocator as it comes, so its
    numerics lack CUDA_MEMORY_POLICY's keys and keep the others; it runs on cuda only, for
    the frameworks whose default the spec changes (they have a CUDA build)."""
    task = next(t for t, info in spec.TASKS.items() if info.default_allocator)
    assert spec.TASKS[task].variant_of == "backward" and spec.TASKS[task].devices == ("cuda",)
    assert spec.cuda_numerics("backward") == spec.CUDA_NUMERICS
    dropped = set(spec.CUDA_NUMERICS) - set(spec.cuda_numerics(task))
    assert dropped == set(spec.CUDA_MEMORY_POLICY.values())
    assert spec.cuda_numerics(task).items() <= spec.CUDA_NUMERICS.items()
    for framework in spec.CUDA_MEMORY_POLICY:
        assert "cuda" in spec.FRAMEWORKS[framework].devices
        assert spec.task_refusal(framework, task, "cuda") is None
        assert "cuda only" in spec.task_refusal(framework, task, "cpu")
    assert "its backward cells" in spec.task_refusal("jax", task, "cuda")
    assert all(spec.task_refusal(f, "backward", d) is None for f in spec.FRAMEWORKS
               for d in spec.DEVICES)


def test_the_study_protocol_task_runs_in_the_frameworks_whose_code_the_study_gives():
    """The study's protocol (issue 47): its published code (000 Figs. 1-2) is PyTorch's and
    TensorFlow's; every other framework refuses it by the spec's declaration, on every device,
    and it is no experiment of the study's (no claim or table reads it as one).  It is checked
    as a backward pass is: the gradients, against backward's float64 reference."""
    task = spec.STUDY_PROTOCOL_TASK
    info = spec.TASKS[task]
    assert info.study_code == spec.STUDY_FRAMEWORKS and info.separable
    assert info.derivative == spec.TASKS["backward"].derivative == "gradients"
    assert spec.REFERENCE_TASK[info.derivative] == "backward"
    assert task not in spec.STUDY_TASKS and info.variant_of is None
    for framework in spec.FRAMEWORKS:
        for device in spec.DEVICES:
            why = spec.task_refusal(framework, task, device)
            if framework in info.study_code:
                assert why is None, (framework, device)
            else:
                assert why == (f"the task {task} runs the study's published code, which it "
                               "gives for torch and tensorflow only"), (framework, device)
    assert spec.timed_quantities("torch", "script", task) == ("forward_s", "backward_s",
                                                               "step_s")
    assert spec.timed_quantities("tensorflow", "graph", task) == ("step_s",)


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_a_frozen_part_names_the_models_first_parameters_and_leaves_some_trainable(model):
    info = spec.MODELS[model]
    names = [p.name for p in info.params]
    assert set(info.frozen) <= set(names)
    # the first layers: the frozen names are a leading run of the spec's order
    assert names[:len(info.frozen)] == list(info.frozen)
    assert len(info.frozen) < len(names)
    trained = info.trained("backward_frozen")
    assert [names[i] for i in trained] == names[len(info.frozen):]
    assert info.trained("backward") == list(range(len(names)))


def test_the_frozen_parts_are_the_first_half_of_an_mlp_and_a_networks_feature_layers():
    frozen = {m: spec.MODELS[m].frozen for m in spec.MODELS}
    assert frozen["mlp512"] == ("fc0.weight", "fc0.bias")  # 2 layers: the first
    assert frozen["mlp354x2"] == ("fc0.weight", "fc0.bias")  # 3 layers: rounded down
    assert frozen["mlp294x3"] == ("fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias")
    assert frozen["cnn"] == tuple(f"conv{i}.{k}" for i in (0, 1) for k in ("weight", "bias"))
    assert [p.name for p in spec.MODELS["resnet50"].params if p.name not in
            frozen["resnet50"]] == ["fc.weight", "fc.bias"]
    assert frozen["rnn_cell"] == ("W_h",)
    assert not frozen["dense"] and not frozen["fc_xent"] and not frozen["ctc"]


def test_a_frozen_cell_has_a_reference_of_its_own_kind():
    cell = spec.Cell("torch", "eager", "mlp512", "backward_frozen", "cpu", 1, 0)
    assert cell.reference_path == "reference/mlp512/trainable_gradients/seed0.npz"
    retained = spec.Cell("torch", "eager", "mlp512", "backward_retained", "cpu", 1, 0)
    assert retained.reference_path == "reference/mlp512/gradients/seed0.npz"


# ------------------------------------------------------------------ the backends' declarations
def test_every_backend_declares_what_it_does_without_importing_its_framework():
    """Each backend's CAPABILITIES (adbench.backends) name only what the spec knows, and
    reading them imports no framework: measure.py refuses a cell before any import."""
    import subprocess
    import sys

    from adbench import backends

    for framework in spec.FRAMEWORKS:
        declared = backends.capabilities(framework)
        assert declared.framework == framework and declared.problems() == [], framework
        assert declared.modes == tuple(spec.FRAMEWORKS[framework].modes)
    code = ("import sys; sys.path.insert(0, 'workflow/scripts'); from adbench import backends, "
            "spec; [backends.capabilities(f) for f in spec.FRAMEWORKS]; "
            "print(sorted(m for m in spec.FRAMEWORKS if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_a_declared_refusal_is_the_cells_message_before_anything_runs():
    from adbench import backends

    autograd = backends.capabilities("autograd")
    assert "no retain_graph" in autograd.refusal("eager", "mlp512", "backward_retained", "cpu")
    assert autograd.refusal("eager", "mlp512", "backward", "cpu") is None
    assert autograd.refusal("eager", "mlp512", "backward", "cuda") == (
        "autograd has no cuda build in this pipeline")
    # what the spec says of a model holds for every backend alike
    assert backends.capabilities("torch").refusal(
        "eager", "dense", "backward_frozen", "cpu").startswith("dense has no frozen part")
    # a run-time refusal is no refusal until the run meets its error
    torch = backends.capabilities("torch")
    assert torch.refusal("script", "mlp512", "loss_jacobian", "cpu") is None
    met = RuntimeError("The stateless API can't be used with Jitted modules")
    found = torch.refusal_of("script", "mlp512", "loss_jacobian", "cpu", met)
    assert found is not None and found.message(met).startswith(found.reason)
    assert torch.refusal_of("eager", "mlp512", "loss_jacobian", "cpu", met) is None


def test_a_typo_in_a_declaration_is_a_problem():
    from adbench.backends import Capabilities, Refusal

    typo = Capabilities("torch", refusals=(Refusal("why", tasks=("backwrd",)),
                                           Refusal("why", modes=("jit",))))
    assert typo.problems() == ["torch: a refusal names unknown tasks 'backwrd'",
                               "torch: a refusal names unknown modes 'jit'"]


def test_every_tasks_derivative_kind_is_declared_once_with_its_reference():
    """A task's derivative kind is one of adbench.derivatives.KINDS (shaped there, for every
    backend), and every kind a task computes names the task its float64 reference comes from."""
    from adbench import derivatives
    used = {info.derivative for info in spec.TASKS.values()}
    assert used <= set(derivatives.KINDS), used - set(derivatives.KINDS)
    assert used <= set(spec.REFERENCE_TASK), used - set(spec.REFERENCE_TASK)
