"""Recorded exporter data for the Prometheus source's tests, and a real Prometheus server serving it.

`openmetrics()` writes what a DCGM exporter, node exporter and NCCL Inspector would have had
scraped during one run of a 2-node x 8-GPU job (job 4242, attempt 1, pods muster-4242-1-0 and
-1 in namespace muster-jobs), every 30 s for 30 minutes from 2024-03-01 00:00 UTC, with:

- GPU utilisation of rank r, GPU g, scrape k: 50 + 10 r + g + (k % 4) percent, so every
  one-minute bucket has a distinct mean, minimum and maximum that are easy to work out;
- the host label spelled `Hostname` on gpu-a (rank 0) and `hostname` on gpu-b (rank 1), and
  GPU 0 of gpu-a switching from `Hostname` to `hostname` half way (an exporter upgrade);
- a gap: gpu-b's GPU 5 reports nothing for scrapes 20-29 (minutes 10 to 15);
- NCCL bus bandwidth of each pod (300 and 310 GB/s), missing for everyone at scrapes 40-49;
- node exporter's InfiniBand counters of two ports per node, at a constant rate per port,
  from 10 minutes before the run to 10 minutes after it;
- pods that are not the job's, which must never be counted: attempt 10 of the job
  (`muster-4242-10-0`), job 42421 (`muster-42421-1-0`), both on gpu-c, and a pod named like the
  job's in another namespace on gpu-d; and gpu-c's InfiniBand counters.

`PrometheusServer.start()` turns it into TSDB blocks with `promtool tsdb create-blocks-from
openmetrics` and starts `prometheus` on a free loopback port over them. With `secure=True` it
serves https only, with a certificate signed by a CA made for the run (`ca_file`), and asks for
HTTP basic auth (`USERNAME` / `PASSWORD`), through Prometheus' own `--web.config.file`.
"""

from __future__ import annotations

import base64
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

T0 = 1_709_251_200  # 2024-03-01 00:00:00 UTC
SCRAPE = 30
SCRAPES = 60  # 30 minutes
RUN_SECONDS = SCRAPE * SCRAPES
JOB, ATTEMPT, NAMESPACE = 4242, 1, "muster-jobs"
POD_PREFIX = f"muster-{JOB}-{ATTEMPT}-"
NODES = ("gpu-a", "gpu-b")  # rank 0, rank 1
GPUS = 8
GAP_NODE, GAP_GPU, GAP_SCRAPES = "gpu-b", 5, range(20, 30)
NCCL_GAP_SCRAPES = range(40, 50)
RENAMED_GPU, RENAMED_AT = 0, 30  # gpu-a's GPU 0 is labelled `hostname` from scrape 30 on
# Bytes per second per InfiniBand port (two ports per node).
IB_TX_PER_PORT = {"gpu-a": 1.0e9, "gpu-b": 1.5e9, "gpu-c": 5.0e9}
IB_RX_PER_PORT = {"gpu-a": 0.5e9, "gpu-b": 2.0e9, "gpu-c": 7.0e9}
IB_PORTS = ("mlx5_0", "mlx5_1")


def gpu_util(rank: int, gpu: int, k: int) -> float:
    return 50.0 + 10 * rank + gpu + (k % 4)


# The DCGM fields loaded besides utilisation, as a function of (rank, GPU, scrape).
DCGM = {
    "DCGM_FI_DEV_GPU_UTIL": gpu_util,
    "DCGM_FI_PROF_SM_ACTIVE": lambda r, g, k: gpu_util(r, g, k) / 125,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": lambda r, g, k: gpu_util(r, g, k) / 200,
    "DCGM_FI_PROF_DRAM_ACTIVE": lambda r, g, k: 0.25,
    "DCGM_FI_DEV_FB_USED": lambda r, g, k: 40_000.0 + 1000 * r + g,
    "DCGM_FI_PROF_PCIE_TX_BYTES": lambda r, g, k: 1.0e9 * (r + 1),
    "DCGM_FI_PROF_PCIE_RX_BYTES": lambda r, g, k: 2.0e9,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": lambda r, g, k: 1.0e10,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": lambda r, g, k: 1.1e10,
    "DCGM_FI_DEV_POWER_USAGE": lambda r, g, k: 300.0 + r,
    "DCGM_FI_DEV_GPU_TEMP": lambda r, g, k: 60.0 + g,
}


def nccl_busbw(rank: int) -> float:
    return 300.0 + 10 * rank


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _gpu_lines(name: str) -> Iterator[str]:
    value = DCGM[name]
    for rank, node in enumerate(NODES):
        host_label = "Hostname" if rank == 0 else "hostname"
        for gpu in range(GPUS):
            pod = f"{POD_PREFIX}{rank}"
            base = {"gpu": str(gpu), "UUID": f"GPU-{rank:04d}{gpu:04d}", "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3"}
            for k in range(SCRAPES):
                if node == GAP_NODE and gpu == GAP_GPU and k in GAP_SCRAPES:
                    continue
                label = "hostname" if (rank == 0 and gpu == RENAMED_GPU and k >= RENAMED_AT) else host_label
                labels = {**base, label: node, "container": "trainer", "namespace": NAMESPACE, "pod": pod}
                yield f"{name}{_labels(**labels)} {value(rank, gpu, k)} {T0 + SCRAPE * k}"
    # Not the job's: another attempt, another job whose id starts alike, the same pod name in another namespace.
    strangers = (("gpu-c", NAMESPACE, f"muster-{JOB}-10-0", 0.0), ("gpu-c", NAMESPACE, f"muster-{JOB}1-1-0", 100.0))
    strangers += (("gpu-d", "other", f"{POD_PREFIX}0", 100.0),)
    for node, namespace, pod, v in strangers:
        for gpu in range(GPUS):
            labels = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "Hostname": node, "namespace": namespace, "pod": pod}
            for k in range(SCRAPES):
                yield f"{name}{_labels(**labels)} {v} {T0 + SCRAPE * k}"


def _ib_lines(family: str, per_port: dict[str, float]) -> Iterator[str]:
    for node, rate in per_port.items():
        for device in IB_PORTS:
            labels = _labels(device=device, port="1", instance=node, job="node-exporter")
            for k in range(-20, SCRAPES + 20):
                # A counter that has been counting for a while (far from zero, so rate() never clamps).
                yield f"{family}_total{labels} {1.0e13 + rate * SCRAPE * (k + 20)} {T0 + SCRAPE * k}"


def openmetrics() -> Iterator[str]:
    """The recorded data as OpenMetrics text: each family's series together, each series in time order."""
    for name in DCGM:
        yield f"# TYPE {name} gauge"
        yield from _gpu_lines(name)
    yield "# TYPE nccl_bus_bandwidth_gbs gauge"
    for rank in range(len(NODES)):
        labels = _labels(namespace=NAMESPACE, pod=f"{POD_PREFIX}{rank}")
        for k in range(SCRAPES):
            if k not in NCCL_GAP_SCRAPES:
                yield f"nccl_bus_bandwidth_gbs{labels} {nccl_busbw(rank)} {T0 + SCRAPE * k}"
    for family, per_port in (
        ("node_infiniband_port_data_transmitted_bytes", IB_TX_PER_PORT),
        ("node_infiniband_port_data_received_bytes", IB_RX_PER_PORT),
    ):
        yield f"# TYPE {family} counter"
        yield from _ib_lines(family, per_port)
    yield "# EOF"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USERNAME = "muster"
PASSWORD = "muster-test-password"
# bcrypt of PASSWORD at cost 4 (Prometheus' web config wants bcrypt; made once with Python's crypt module).
PASSWORD_BCRYPT = "$2b$04$eJeYcYy/vghlW1/V8aTiNuJLoaDAVb0M51UtyCQLqhDzUn1u1i1sC"


def make_certificates(workdir: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for 127.0.0.1: (ca.crt, server.crt, server.key)."""
    ca_key, ca, key, csr, cert, ext = (workdir / n for n in ("ca.key", "ca.crt", "server.key", "server.csr", "server.crt", "san.ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=muster-test-ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext],
    ):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True, timeout=60)
    return ca, cert, key


@dataclass
class PrometheusServer:
    """`prometheus` over TSDB blocks made from the recorded data, on a free loopback port."""

    workdir: Path
    secure: bool = False
    # Where `prometheus` and `promtool` are (None: on PATH, e.g. Debian's Prometheus 2).
    bin_dir: str | None = None
    process: subprocess.Popen | None = None
    url: str = ""
    ca_file: str = ""

    def start(self, *, timeout: float = 60) -> PrometheusServer:
        data = self.workdir / "data"
        source = self.workdir / "recorded.om"
        source.write_text("\n".join(openmetrics()) + "\n")
        subprocess.run(
            [self._tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        config = self.workdir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 30s\n")  # nothing to scrape: the blocks are all it serves
        web: list[str] = []
        if self.secure:
            ca, cert, key = make_certificates(self.workdir)
            self.ca_file = str(ca)
            web_config = self.workdir / "web.yml"
            web_config.write_text(
                f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\nbasic_auth_users:\n  {USERNAME}: '{PASSWORD_BCRYPT}'\n"
            )
            web = [f"--web.config.file={web_config}"]
        log = (self.workdir / "prometheus.log").open("wb")
        for _ in range(3):  # the port is free when picked; another process may take it before prometheus binds
            port = free_port()
            self.url = f"{'https' if self.secure else 'http'}://127.0.0.1:{port}"
            self.process = subprocess.Popen(
                [
                    self._tool("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    "--storage.tsdb.retention.time=100y",  # the recorded blocks are from 2024
                    f"--web.listen-address=127.0.0.1:{port}",
                    *web,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            if self._wait_ready(timeout):
                return self
            self.stop()
        raise RuntimeError(f"prometheus did not start; see {self.workdir / 'prometheus.log'}")

    def _tool(self, name: str) -> str:
        return str(Path(self.bin_dir) / name) if self.bin_dir else name

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            request = urllib.request.Request(f"{self.url}/-/ready")
            context = None
            if self.secure:
                context = ssl.create_default_context(cafile=self.ca_file)
                request.add_header("Authorization", "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode())
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
