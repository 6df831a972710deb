"""The telemetry summary on the job resource (imported by api.jobs.serializers, so it imports nothing of api.jobs)."""

from __future__ import annotations

from rest_framework import serializers

from telemetry.models import JobTelemetrySummary


class TelemetrySummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = JobTelemetrySummary
        fields = [
            "attempts", "gpu_seconds", "gpu_util_mean", "sm_active_mean", "tensor_active_mean", "memory_peak_mib",
            "pcie_tx_bytes", "pcie_rx_bytes", "nvlink_tx_bytes", "nvlink_rx_bytes", "ib_tx_bytes", "ib_rx_bytes",
            "nccl_busbw_mean_gbs", "nccl_busbw_origin", "nccl_samples", "flags", "computed_at",
        ]  # fmt: skip
        read_only_fields = fields
