"""HIPS autograd's backend: models as plain numpy functions over autograd.numpy,
derivatives by autograd's tracer (make_vjp / grad / jacobian), re-traced at every call
(eager only).  What it runs and refuses is declared here (no import of autograd);
device.py, models.py and tasks.py hold the rest (adbench.backends says what each is for).
"""

from adbench.backends import Capabilities, Refusal, fixed_shapes_only

CAPABILITIES = Capabilities(
    framework="autograd",
    refusals=(
        fixed_shapes_only("HIPS autograd"),
        Refusal("autograd's tape lives in the vjp closure make_vjp returns and goes with it: "
                "there is no retain_graph to set (the graph is kept exactly as long as the "
                "caller keeps the vjp)", tasks=("backward_retained",)),
    ),
)
