"""Environment capture: what a run ran on, for env.json and run manifests.

Works with `paddlepaddle` (CPU), `paddlepaddle-gpu`, and with no paddle at all
(the framework fields are then null, never a crash). Records the paddle
version and commit, whether it was built with CUDA, the CUDA and cuDNN
versions, device names, the CPU's kernel-deciding extensions, the
paddle.distributed rank environment, the determinism settings that change results
(FLAGS_cudnn_deterministic, NCCL_ALGO, CUBLAS_WORKSPACE_CONFIG, ...), library
versions, and the sha256 of the model's config.json.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gates.core.run_protocol import RANK_VARIABLES, launch_variables

DETERMINISM_VARIABLES = (
    "FLAGS_cudnn_deterministic",
    "FLAGS_embedding_deterministic",
    "FLAGS_cudnn_exhaustive_search",
    "FLAGS_conv_workspace_size_limit",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE",
    "CUDA_LAUNCH_BLOCKING",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
)
LIBRARIES = (
    "paddlepaddle",
    "paddlepaddle-gpu",
    "paddleformers",
    "paddlenlp",
    "paddlefleet",
    "torch",
    "transformers",
    "numpy",
    "safetensors",
)


def library_versions() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _paddle() -> dict[str, Any]:
    """Paddle's build and devices; all null when paddle is not installed."""
    try:
        import paddle  # noqa: PLC0415  (optional, slow to import)
    except ImportError:
        return {
            "framework": None,
            "framework_version": None,
            "framework_commit": None,
            "cuda_build": None,
            "cuda_version": None,
            "cudnn_version": None,
            "device_name": None,
            "device_count": 0,
        }
    cuda = bool(paddle.is_compiled_with_cuda())
    count = paddle.device.cuda.device_count() if cuda else 0
    names = [paddle.device.cuda.get_device_name(index) for index in range(count)]
    return {
        "framework": "paddle",
        "framework_version": paddle.__version__,
        "framework_commit": paddle.version.commit,
        "cuda_build": cuda,
        "cuda_version": paddle.version.cuda() if cuda else None,
        "cudnn_version": paddle.version.cudnn() if cuda else None,
        "device_name": names[0] if names else "cpu",
        "device_names": names,
        "device_count": count,
    }


def _torch() -> dict[str, Any]:
    """The reference side's PyTorch build and devices; null when torch is not installed."""
    try:
        import torch  # noqa: PLC0415  (optional, slow to import)
    except ImportError:
        return {"framework": None, "framework_version": None, "device_name": None}
    cuda = bool(torch.cuda.is_available())
    names = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    )
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "cuda_build": torch.version.cuda is not None,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None,
        "device_name": names[0] if names else "cpu",
        "device_names": names,
        "device_count": len(names),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


#: the CPU's instruction-set extensions that decide which kernels MKL, oneDNN and the
#: frameworks' own CPU code pick: the same build on another set computes other last bits.
#: MKL's code paths follow its CBWR branches: AVX-512 (Skylake), with VNNI (Cascade Lake),
#: with IFMA and VBMI (Ice Lake: a Cascade Lake's recorded losses differ there from about
#: the tenth step), with BF16 (Cooper Lake), with AMX and FP16 (Sapphire Rapids); AVX-VNNI
#: is the AVX2 machines' (Alder Lake)
KERNEL_FLAGS = frozenset(
    (
        "avx",
        "avx2",
        "avx_vnni",
        "fma",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512_vnni",
        "avx512ifma",
        "avx512vbmi",
        "avx512_vbmi2",
        "avx512_bitalg",
        "avx512_vpopcntdq",
        "avx512_bf16",
        "avx512_fp16",
        "amx_tile",
        "amx_bf16",
        "amx_int8",
        "asimd",
        "sve",
        "sve2",
        "bf16",
        "i8mm",
    )
)


def cpu_kernels(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The kernel-deciding extensions of this CPU, sorted, one space apart, after its vendor
    where the system names one (`vendor:GenuineIntel`: MKL dispatches on the vendor too);
    None where the system does not list the extensions (not Linux)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    vendor: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and not vendor:
            vendor = [f"vendor:{value.strip()}"]
        if key.strip() in ("flags", "Features"):
            return " ".join(vendor + sorted(KERNEL_FLAGS.intersection(value.split())))
    return None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def capture(
    *,
    model_config: Path | None = None,
    framework: str | None = "paddle",
    variables: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A JSON-ready description of this process's environment. The rank and determinism
    variables come from ``variables`` (a command's invocation hands in its environment);
    None: this training process's own, read through the run protocol."""
    if variables is None:
        variables = launch_variables((*RANK_VARIABLES, *DETERMINISM_VARIABLES))
    probes = {"paddle": _paddle, "torch": _torch}
    found: dict[str, Any] = probes[framework]() if framework in probes else {"framework": framework}
    world = variables.get("PADDLE_TRAINERS_NUM")
    found.update(
        {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_kernels": cpu_kernels(),
            "host": socket.gethostname(),
            "world_size": int(world) if world and world.isdigit() else 1,
            "rank": {name: variables[name] for name in RANK_VARIABLES if name in variables},
            "determinism": {
                name: variables[name] for name in DETERMINISM_VARIABLES if name in variables
            },
            "libraries": library_versions(),
            "model_config_sha256": file_sha256(model_config) if model_config else None,
        }
    )
    return found
