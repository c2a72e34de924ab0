"""``xeforge batch DIR --ray``: a directory of kernels over every CPU and GPU of a Ray cluster.

One Ray task per problem runs its whole pipeline (:mod:`.tasks`); inside it, every verification
worker job is a Ray task of its own that asks for what its role needs: a whole GPU for timing, a
share of one (or a CPU) for compile and correctness (:mod:`.jobs`). The driver (:mod:`.driver`)
connects to a cluster or starts a local instance, streams rows back as they finish, retries
tasks whose worker or node died, and cancels everything on Ctrl-C.

Ray is an optional extra (``pip install -e ".[ray]"``): this package imports ``ray`` only inside
functions, and :func:`require_ray` says which extra to install when it is missing.
"""

from xeforge_core.raybatch.driver import (
    RayBatchOptions,
    RayNotInstalled,
    RaySetupError,
    forwarded_environment,
    require_ray,
    run_ray_batch,
)
from xeforge_core.raybatch.jobs import JobPlacement, RayJobError, RayWorkerRunner

__all__ = ["JobPlacement", "RayBatchOptions", "RayJobError", "RayNotInstalled", "RaySetupError",
           "RayWorkerRunner", "forwarded_environment", "require_ray", "run_ray_batch"]
