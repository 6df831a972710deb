from django.contrib import admin

from telemetry.models import JobTelemetrySummary, NcclSample


# Read-only: summaries are computed from stored series, samples are what jobs pushed.
@admin.register(JobTelemetrySummary)
class JobTelemetrySummaryAdmin(admin.ModelAdmin):
    list_display = ["job", "gpu_util_mean", "tensor_active_mean", "memory_peak_mib", "nccl_busbw_mean_gbs", "computed_at"]
    readonly_fields = [f.name for f in JobTelemetrySummary._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(NcclSample)
class NcclSampleAdmin(admin.ModelAdmin):
    list_display = ["job", "attempt", "at", "format", "coll", "msg_size_bytes", "busbw_gbs"]
    list_filter = ["format", "coll"]
    readonly_fields = [f.name for f in NcclSample._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False
