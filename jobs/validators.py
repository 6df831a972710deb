"""Validation of what a user may ask a job to be, shared by the API and the browser form."""

from __future__ import annotations

import re

# The container image reference grammar (distribution/reference): [registry[:port]/]path[:tag][@digest].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# The first component is a registry only when it looks like one (a dot, a port, localhost or an IPv6
# address), as Docker decides; otherwise it is a path component, which must be lowercase ("UPPER/case").
_DOMAIN = (
    rf"(?:(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})+|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
    rf"|{_DOMAIN_COMPONENT}:[0-9]+|localhost)"
)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# Matched with fullmatch (`$` would accept a trailing newline), ASCII-only like the Go grammar's \w.
IMAGE_REFERENCE = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
IMAGE_MAX_LENGTH = 512

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch
_RENDEZVOUS_NAMES = """MASTER_ADDR MASTER_PORT WORLD_SIZE NODE_RANK NPROC_PER_NODE RANK LOCAL_RANK GROUP_RANK ROLE_RANK
    LOCAL_WORLD_SIZE GROUP_WORLD_SIZE ROLE_WORLD_SIZE"""
# Environment a job may not set, by why (docs/security.md lists them). A job gets exactly the GPUs, the
# rendezvous and the credentials Muster gave it; these names are how a container would reach others.
REFUSED_ENV: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    # NVIDIA's container runtime reads these to choose which of the node's GPUs a container sees: "all" is
    # every GPU of the node, whoever holds them.
    "steer the GPU runtime": (
        ("NVIDIA_", "CUDA_MPS_"),
        frozenset({"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"}),
    ),
    # The dynamic loader runs whatever these name inside every process of the job.
    "steer the dynamic loader": (("LD_",), frozenset()),
    # In-cluster clients find the API server by these; a job has no business there.
    "steer the Kubernetes client": (("KUBERNETES_",), frozenset()),
    # Muster sets the rendezvous itself: a job that sets them joins or splits another gang.
    "are the gang's rendezvous, set by Muster": (
        ("MUSTER_", "OMPI_MCA_", "OMPI_COMM_WORLD_", "PMIX_", "PMI_", "TORCHELASTIC_", "PET_"),
        frozenset(_RENDEZVOUS_NAMES.split()),
    ),
}
ENV_MAX_ENTRIES = 256
ENV_MAX_BYTES = 64 * 1024

COMMAND_MAX_ARGS = 4096
COMMAND_MAX_BYTES = 64 * 1024


def printable_name(text: str) -> bool:
    """A name a page or a terminal shows as it reads: no control characters, nor the invisible format characters
    (a zero-width space, a bidi override reversing what follows) that made a job's name blank or misleading."""
    return bool(text) and text.isprintable()


def image_reference_error(image: str) -> str | None:
    if len(image) > IMAGE_MAX_LENGTH:
        return f"An image reference is at most {IMAGE_MAX_LENGTH} characters."
    if not IMAGE_REFERENCE.fullmatch(image):
        return f"{image!r} is not a valid container image reference (expected e.g. nvcr.io/nvidia/pytorch:24.05-py3)."
    return None


def env_refusal(name: str) -> str | None:
    """Why a job may not set this variable, or None when it may (names compare as the runtime does: exactly)."""
    for why, (prefixes, names) in REFUSED_ENV.items():
        if name in names or name.startswith(prefixes):
            return why
    return None


def env_errors(env: dict[str, str], *, cite_docs: bool = True) -> list[str]:
    """Every mistake in a job's environment; a refused name's reason cites docs/security.md unless `cite_docs` is False
    (the browser form, where no link leads to it)."""
    errors: list[str] = []
    if len(env) > ENV_MAX_ENTRIES:
        errors.append(f"At most {ENV_MAX_ENTRIES} variables.")
    refused: dict[str, list[str]] = {}
    for name in env:
        if not ENV_NAME.fullmatch(name):
            errors.append(f"{name!r} is not a valid variable name (letters, digits and _, not starting with a digit).")
        elif why := env_refusal(name):
            refused.setdefault(why, []).append(name)
    for why, names in refused.items():
        cited = " (docs/security.md)" if cite_docs else ""
        errors.append(f"{', '.join(sorted(names))} cannot be set by a job: these variables {why}{cited}.")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in env.items())
    if size > ENV_MAX_BYTES:
        errors.append(f"The environment is {size} bytes; the limit is {ENV_MAX_BYTES}.")
    return errors


def command_errors(command: list[str]) -> list[str]:
    if not command or not command[0].strip():
        return ['The command cannot be empty: give the program to run, e.g. ["torchrun", "train.py"].']
    if len(command) > COMMAND_MAX_ARGS:
        return [f"At most {COMMAND_MAX_ARGS} arguments."]
    size = sum(len(arg.encode()) for arg in command)
    if size > COMMAND_MAX_BYTES:
        return [f"The command is {size} bytes; the limit is {COMMAND_MAX_BYTES}."]
    return []


VOLUMES_MAX = 16
# Where a team's data may not be mounted: the system's own directories, and what Muster mounts itself.
RESERVED_MOUNT_PATHS = (
    "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var/run",
)  # fmt: skip
MOUNT_PATH = re.compile(r"/[A-Za-z0-9._/-]*")  # fullmatch


def mount_path_error(path: str) -> str | None:
    """Why a job may not mount a volume at `path`, or None."""
    if not MOUNT_PATH.fullmatch(path) or len(path) > 512:
        return f"{path!r} is not an absolute path of letters, digits, '.', '_', '-' and '/'."
    parts = [p for p in path.split("/") if p]
    if ".." in parts or "." in parts:
        return f"{path!r} may not contain '.' or '..'."
    normal = "/" + "/".join(parts)
    for reserved in RESERVED_MOUNT_PATHS:
        if normal == reserved or (reserved != "/" and normal.startswith(reserved + "/")):
            return f"{normal} is a system directory; mount data elsewhere, e.g. under /data."
    return None


def volume_errors(volumes: list[dict[str, object]]) -> list[str]:
    """The shape of a job's volume list: at most VOLUMES_MAX, each at its own allowed path (the claims are the team's to say)."""
    if len(volumes) > VOLUMES_MAX:
        return [f"At most {VOLUMES_MAX} volumes."]
    errors: list[str] = []
    seen: set[str] = set()
    for volume in volumes:
        path = str(volume.get("mount_path", ""))
        if error := mount_path_error(path):
            errors.append(error)
            continue
        normal = "/" + "/".join(p for p in path.split("/") if p)
        if any(normal == other or normal.startswith(other + "/") or other.startswith(normal + "/") for other in seen):
            errors.append(f"{normal} overlaps another volume's mount path.")
        seen.add(normal)
    return errors
