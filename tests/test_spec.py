"""adbench.spec: the grid, the file layout, the models, data, weights, reference gradients."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adbench import spec

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


def test_invalid_pairs_name_the_key_and_the_bad_value():
    assert spec.invalid_pairs({"torch": ["eager", "script"], "tensorflow": ["eager"]}) == []
    problems = spec.invalid_pairs({"torch": ["eager", "graph"], "jax": ["jit"]})
    assert len(problems) == 2
    mode_msg, framework_msg = problems
    assert "grid.frameworks.torch" in mode_msg and "'graph'" in mode_msg
    assert "eager" in mode_msg and "script" in mode_msg  # the valid choices
    assert "grid.frameworks" in framework_msg and "'jax'" in framework_msg


# ------------------------------------------------------------------ paths
CELL = spec.Cell("tensorflow", "graph", "mlp354x2", "backward", "cuda", 8, 12)


@pytest.mark.parametrize("path_attr, pattern", [("raw_path", spec.RAW_PATTERN),
                                                ("gradient_path", spec.GRADIENT_PATTERN)])
def test_cell_from_path_round_trips(path_attr, pattern):
    path = getattr(CELL, path_attr)
    assert path == ("results/raw/cuda/tensorflow/graph/mlp354x2/backward/t8/seed12.parquet"
                    if path_attr == "raw_path" else
                    "results/gradients/cuda/tensorflow/graph/mlp354x2/backward/t8/seed12.npz")
    assert spec.cell_from_path(path, pattern) == CELL
    assert spec.cell_from_path("/abs/prefix/" + path, pattern) == CELL


@pytest.mark.parametrize("path, pattern", [
    (CELL.gradient_path, spec.RAW_PATTERN),
    (CELL.raw_path, spec.GRADIENT_PATTERN),
    ("results/raw/cpu/torch/eager/mlp512/backward/seed0.parquet", spec.RAW_PATTERN),
    ("results/raw/cpu/torch/eager/mlp512/backward/t1/seed0.parquet.tmp", spec.RAW_PATTERN),
    ("results/tables/table1_eager.csv", spec.RAW_PATTERN),
])
def test_cell_from_path_rejects_foreign_paths(path, pattern):
    with pytest.raises(ValueError, match="does not match"):
        spec.cell_from_path(path, pattern)


# ------------------------------------------------------------------ models
def test_parameter_counts_of_the_three_mlps():
    counts = {name: mlp.n_parameters for name, mlp in spec.MODELS.items()}
    assert counts == {"mlp512": 407050, "mlp354x2": 407110, "mlp294x3": 407200}
    # The study's published counts are the weight matrices alone, without biases.
    published = {"mlp512": 406528, "mlp354x2": 406392, "mlp294x3": 406308}
    for name, mlp in spec.MODELS.items():
        biases = sum(mlp.layer_sizes[1:])
        assert mlp.n_parameters - biases == published[name]
        shapes = [w.shape for w, _ in spec.make_weights(spec.Workload(name, seed=0))]
        assert sum(a * b for a, b in shapes) == published[name]


# ------------------------------------------------------------------ data and weights
def small(seed=0, **kw):
    return spec.Workload(model="mlp512", seed=seed, **{"n_samples": 300, "batch_size": 128,
                                                        "warmup": 1, "iterations": 2, **kw})


def test_data_is_deterministic_per_seed_float32_with_one_hot_labels():
    x, y = spec.make_data(small(seed=5))
    x2, y2 = spec.make_data(small(seed=5))
    x3, y3 = spec.make_data(small(seed=6))
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert not np.array_equal(x, x3) and not np.array_equal(y, y3)
    assert x.dtype == y.dtype == np.float32
    assert x.shape == (300, 784) and y.shape == (300, 10)
    assert 0.0 <= x.min() and x.max() < 1.0
    assert set(np.unique(y)) == {0.0, 1.0}
    assert np.all(y.sum(axis=1) == 1.0)


def test_weights_are_deterministic_per_seed_float32_glorot_and_zero_bias():
    w5, w5b, w6 = (spec.make_weights(small(seed=s)) for s in (5, 5, 6))
    sizes = spec.MODELS["mlp512"].layer_sizes
    assert [(w.shape, b.shape) for w, b in w5] == [((784, 512), (512,)), ((512, 10), (10,))]
    for (w, b), (wb, _), (w_other, _), fan_in, fan_out in zip(w5, w5b, w6, sizes, sizes[1:]):
        assert w.dtype == b.dtype == np.float32
        assert np.array_equal(w, wb) and not np.array_equal(w, w_other)
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


def test_short_runs_generate_only_the_rows_they_touch():
    assert small(n_samples=60000).rows_needed() == 3 * 128  # 1 warm-up + 2 measured batches
    assert small(n_samples=300, iterations=10).rows_needed() == 300  # wraps: the whole set
    x, _ = spec.make_data(small(n_samples=60000))
    assert len(x) == 3 * 128


# ------------------------------------------------------------------ reference gradients
def _loss(x, y, params):
    h = x.astype(np.float64)
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = np.maximum(h, 0.0)
    return np.linalg.norm(y.astype(np.float64) - h)


@pytest.mark.parametrize("model", ["mlp512", "mlp294x3"])
def test_reference_gradients_match_central_finite_differences(model):
    workload = spec.Workload(model=model, seed=3, n_samples=8, batch_size=8, warmup=0,
                             iterations=1)
    x, y = spec.make_data(workload)
    loss, grads = spec.reference_gradients(workload, x, y)
    params = [p.astype(np.float64) for layer in spec.make_weights(workload) for p in layer]
    assert [g.shape for g in grads] == [p.shape for p in params]
    assert loss == pytest.approx(_loss(x, y, params), rel=1e-12)

    rng = np.random.default_rng(0)
    eps = 1e-6
    for t in (0, 1, len(params) - 2, len(params) - 1):  # first and last weights and biases
        largest = np.unravel_index(np.argmax(np.abs(grads[t])), grads[t].shape)
        randoms = [tuple(int(rng.integers(n)) for n in params[t].shape) for _ in range(2)]
        for idx in [largest, *randoms]:
            plus, minus = [p.copy() for p in params], [p.copy() for p in params]
            plus[t][idx] += eps
            minus[t][idx] -= eps
            numeric = (_loss(x, y, plus) - _loss(x, y, minus)) / (2 * eps)
            assert grads[t][idx] == pytest.approx(numeric, rel=1e-6, abs=1e-9), (t, idx)
    assert all(np.abs(g).max() > 1e-3 for g in grads)  # not trivially zero


def test_workload_fields_are_the_cli_defaults():
    # measure.py takes its defaults from these; the study's epoch is the default.
    defaults = {f.name: f.default for f in dataclasses.fields(spec.Workload) if f.name not in
                ("model", "seed")}
    assert defaults == {"n_samples": 60000, "batch_size": 128, "warmup": 5, "iterations": 469}


def test_make_batches_are_the_epochs_slices_in_order():
    full = spec.Workload(model="mlp512", seed=1, warmup=10, iterations=469)
    batches = spec.make_batches(full)
    assert len(batches) == 469 and len(batches[-1][0]) == 96
    x, y = spec.make_data(full)
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x)
    assert np.array_equal(np.concatenate([b[1] for b in batches]), y)
    short = spec.Workload(model="mlp512", seed=1, warmup=2, iterations=3)
    assert len(spec.make_batches(short)) == 5
