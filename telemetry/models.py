"""Stored telemetry of jobs: downsampled series of finished runs, per-job summaries, pushed NCCL results.

Why a series is one row of packed arrays rather than a row per bucket: a 16-node x 8-GPU
job run for 24 hours has, per metric, 128 GPU series (plus 16 node and 1 job roll-ups) of
1,440 one-minute buckets. As rows per bucket that is ~210,000 rows per metric and ~3 million
per job, each paying PostgreSQL's ~24-byte tuple header and an index entry; a chart would
read hundreds of thousands of rows. As packed arrays it is 145 rows per metric, a chart reads
one row per trace, and decoding an array is a single C call. A series is only ever read
whole (then clipped and coarsened in Python), so nothing is lost by not indexing buckets.
"""

from __future__ import annotations

import sys
from array import array

from django.db import models
from django.db.models import Q

from jobs.models import Job
from telemetry.catalogue import Level
from telemetry.downsampling import Buckets

# Arrays are stored little-endian whatever the machine, so a dump restores anywhere.
_SWAP = sys.byteorder != "little"


def pack(values: list[float] | list[int], typecode: str) -> bytes:
    packed = array(typecode, values)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes | memoryview, typecode: str) -> list:
    values = array(typecode)
    values.frombytes(bytes(data))
    if _SWAP:
        values.byteswap()
    return values.tolist()


class JobSeries(models.Model):
    """One series of one finished run (job attempt) of a job, in buckets aligned to whole multiples of `step_seconds`.

    `level` says what it covers: one GPU (`node`, `gpu` >= 0), one node's GPUs combined
    (`gpu` = -1), or the whole job (`node` = "", `gpu` = -1). Each bucket keeps the mean, minimum,
    maximum and number of samples (float64, float64, float64, uint32; NaN where there are none).
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="telemetry_series")
    attempt = models.PositiveIntegerField()
    metric = models.CharField(max_length=64)
    level = models.CharField(max_length=4, choices=[(lv.value, lv.value) for lv in Level])
    node = models.CharField(max_length=253, blank=True)
    gpu = models.SmallIntegerField(default=-1)
    rank = models.PositiveIntegerField(null=True, blank=True)
    first_bucket = models.BigIntegerField(help_text="The first bucket starts at first_bucket x step_seconds after the epoch.")
    step_seconds = models.PositiveIntegerField()
    # How long each sample stands for: integrals of rates (total bytes) use it.
    sample_seconds = models.FloatField()
    origin = models.CharField(max_length=32, help_text="The source the samples came from.")
    mean = models.BinaryField()
    min = models.BinaryField()
    max = models.BinaryField()
    count = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "attempt", "metric", "level", "node", "gpu"], name="job_series_unique"),
            models.CheckConstraint(condition=Q(step_seconds__gte=1), name="job_series_step_positive"),
        ]
        indexes = [models.Index(fields=["job", "attempt", "metric", "level"], name="job_series_lookup")]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} {self.metric} {self.level} {self.node} {self.gpu}"

    def buckets(self) -> Buckets:
        return Buckets(
            first=self.first_bucket,
            step=self.step_seconds,
            mean=unpack(self.mean, "d"),
            min=unpack(self.min, "d"),
            max=unpack(self.max, "d"),
            count=unpack(self.count, "I"),
        )

    def set_buckets(self, buckets: Buckets) -> None:
        self.first_bucket = buckets.first
        self.step_seconds = buckets.step
        self.mean = pack(buckets.mean, "d")
        self.min = pack(buckets.min, "d")
        self.max = pack(buckets.max, "d")
        self.count = pack(buckets.count, "I")


class JobTelemetrySummary(models.Model):
    """What a job did with its GPUs and network, over every run stored so far. Null: no samples."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="telemetry_summary")
    attempts = models.JSONField(default=list, help_text="The runs (attempts) this summary covers.")
    gpu_seconds = models.FloatField(default=0, help_text="GPU-seconds of samples behind the means.")
    gpu_util_mean = models.FloatField(null=True, help_text="Percent.")
    sm_active_mean = models.FloatField(null=True, help_text="Ratio, 0 to 1.")
    tensor_active_mean = models.FloatField(null=True, help_text="Ratio, 0 to 1.")
    memory_peak_mib = models.FloatField(null=True)
    pcie_tx_bytes = models.FloatField(null=True)
    pcie_rx_bytes = models.FloatField(null=True)
    nvlink_tx_bytes = models.FloatField(null=True)
    nvlink_rx_bytes = models.FloatField(null=True)
    ib_tx_bytes = models.FloatField(null=True)
    ib_rx_bytes = models.FloatField(null=True)
    nccl_busbw_mean_gbs = models.FloatField(null=True)
    nccl_busbw_origin = models.CharField(max_length=32, blank=True, help_text="pushed (by the job), or the telemetry source's name.")
    nccl_samples = models.PositiveIntegerField(default=0)
    flags = models.JSONField(default=list, help_text="Efficiency flags: [{code, message}].")
    computed_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "job telemetry summaries"

    def __str__(self) -> str:
        return f"telemetry summary of job {self.job_id}"


class NcclSample(models.Model):
    """One NCCL result a job pushed: a collective from NCCL Inspector, or a row of nccl-tests output."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="nccl_samples")
    attempt = models.PositiveIntegerField()
    at = models.DateTimeField()
    received_at = models.DateTimeField()
    format = models.CharField(max_length=16)  # "inspector" | "nccl-tests"
    coll = models.CharField(max_length=64)
    rank = models.PositiveIntegerField(null=True, blank=True)
    msg_size_bytes = models.BigIntegerField()
    exec_time_us = models.FloatField()
    algbw_gbs = models.FloatField()
    busbw_gbs = models.FloatField()
    in_place = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["job", "at"], name="nccl_sample_job_at")]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.coll} {self.busbw_gbs} GB/s"


class TelemetryCredential(models.Model):
    """A job's telemetry push credential, and its push-rate window.

    Holds a random salt, never the token: the token is an HMAC of the job id and the salt
    under SECRET_KEY (telemetry/tokens.py), so every pod of every launch of the job gets the
    same token, and a copy of the database alone cannot forge one. A new salt revokes it.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="telemetry_credential")
    salt = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    window_start = models.DateTimeField(null=True, blank=True)
    window_pushes = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"telemetry credential of job {self.job_id}"


class RunStoreDue(models.Model):
    """A finished run whose series are not stored yet: the transactional outbox of the store task.

    Written in the same transaction as the job's move out of RUNNING, deleted once the run is
    stored. The task is also enqueued at once; this row is how a run whose task was lost (the
    broker was down at the commit, a worker died holding it) is still stored within minutes,
    rather than when Redis redelivers an unacknowledged message an hour later, or never.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs_to_store")
    attempt = models.PositiveIntegerField()
    # When the sweep enqueues the store task (again) if the row is still here.
    due_at = models.DateTimeField()
    tries = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "attempt"], name="run_store_due_unique")]
        indexes = [models.Index(fields=["due_at"], name="run_store_due_at")]

    def __str__(self) -> str:
        return f"store job {self.job_id} attempt {self.attempt} (due {self.due_at:%Y-%m-%d %H:%M:%S})"


class SchedulingLatencyTotal(models.Model):
    """The starts whose wait fell in one bucket of /metrics' scheduling latency histogram, and their waits' sum.

    A running total, added to in the transaction that records each start (`telemetry.latency.latency_event_recorded`), so a
    scrape reads these few rows, never the starts. Each row is one bucket alone, not Prometheus' cumulative ones: the
    waits above the bound below it and at or below its own (`le_us`, whole microseconds; `LE_INF` the waits past the
    last bound). A start adds to one row only, so concurrent starts lock one row each, never several in some order.
    """

    # The bucket past the last bound (+Inf): the largest integer both databases store.
    LE_INF = 2**63 - 1

    le_us = models.BigIntegerField(unique=True)
    starts = models.BigIntegerField(default=0)
    # Whole microseconds, a wait recorded before its queue entry (a skewed clock) as 0: exact, as the waits are.
    waited_us = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["le_us"]

    def __str__(self) -> str:
        bound = "+Inf" if self.le_us == self.LE_INF else f"{self.le_us / 1_000_000:g} s"
        return f"{self.starts} starts waiting at most {bound}"


class EndedJobsTotal(models.Model):
    """How many jobs have ended in one final state: /metrics' `muster_jobs_ended`, a running total added to in the
    transaction that records each end (`telemetry.ended.ended_event_recorded`), so a scrape reads these four rows and
    never counts every job ever submitted."""

    state = models.CharField(max_length=16, unique=True)
    jobs = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["state"]

    def __str__(self) -> str:
        return f"{self.jobs} jobs {self.state}"


class ClusterGpuUse(models.Model):
    """The cluster's measured GPU use now (telemetry/live_use.py): one row, replaced every minute by a beat task that
    reads every running job's live telemetry, so the dashboard reads this row and never the jobs. In the database
    rather than the cache: without Redis each process has a cache of its own, and the web server would never see the
    worker's."""

    at = models.DateTimeField(help_text="When it was measured: the mean is over the window before it.")
    window_seconds = models.PositiveIntegerField()
    jobs_running = models.PositiveIntegerField(default=0)
    jobs_reporting = models.PositiveIntegerField(default=0, help_text="Running jobs with samples in the window.")
    gpus_reporting = models.FloatField(default=0, help_text="The GPUs the reporting jobs hold.")
    busy_gpus = models.FloatField(default=0, help_text="Each reporting job's GPUs times its mean utilisation, summed.")
    unavailable = models.CharField(max_length=500, blank=True, help_text="The source's last error, if it had one.")

    class Meta:
        verbose_name_plural = "cluster GPU use"

    def __str__(self) -> str:
        return f"{self.busy_gpus:.1f} of {self.gpus_reporting:g} GPUs busy at {self.at:%Y-%m-%d %H:%M:%S}"
