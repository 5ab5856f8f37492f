"""torch's own test base for process-group backends, run on ringreduce.

    BACKEND=ringreduce WORLD_SIZE=2 python python/tests/torch_dist_suite.py [-k PATTERN] [-v]

`torch/testing/_internal/distributed/distributed_test.py` (shipped in
torch's wheel) holds `DistributedTest._DistTestBase`, the tests torch runs
on Gloo, NCCL and UCC, one process per rank (spawned), gated by
`BACKEND` and by the feature sets of `DistTestCases.backend_feature`. This
module registers the `ringreduce` backend (`import ringreduce.torch`),
adds it to the sets whose features it has (`gpu`, `cuda`: its CUDA job;
`ddp`; `subgroup`: `new_group` makes a new process group of the backend;
`plugin`), and runs `TestDistBackend` with `_DistTestBase` the way torch's
`test/distributed/test_distributed_spawn.py` runs them for Gloo. Tests that
torch gates on `BACKEND == "gloo"` or `"nccl"` skip with torch's own reason;
every skip is named in the output (`-v`, or pytest's `-rs`).

Needs torch with torch.distributed; without it, says so and exits 0.
"""
import os
import sys

os.environ.setdefault("BACKEND", "ringreduce")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("INIT_METHOD", "env://")
# torch's `run_tests` writes JUnit XML through `xmlrunner` whenever `CI` is
# set (to any value) and fails at that import where xmlrunner is missing;
# this suite reports on stdout, so it runs as it would outside CI.
os.environ.pop("CI", None)

try:
    import torch  # noqa: F401
    import torch.distributed as dist
except ImportError as e:
    print(f"SKIPPED: torch is not installed ({e})")
    sys.exit(0)

import ringreduce.torch  # noqa: F401,E402  (registers the backend in every spawned rank)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for _feature in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
    DistTestCases.backend_feature.setdefault(_feature, set()).add(os.environ["BACKEND"])

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    if not dist.is_available():
        print("SKIPPED: torch.distributed is not available in this torch")
        sys.exit(0)
    run_tests()
