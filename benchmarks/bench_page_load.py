"""The pages with charts as a reader waits for them: a running job's page and the dashboard in Chromium.

`python -m benchmarks.bench_page_load` (PostgreSQL in DATABASE_URL, Chromium at BENCH_CHROMIUM, default
/usr/bin/chromium). It serves benchmarks.bench_api's database (16 nodes with a running 1 x 8 job each: an hour of
simulated telemetry) with gunicorn as shipped, and prints one JSON line per page: medians over BENCH_PAGE_VISITS (5)
first visits (an empty cache) and as many second visits, in seconds from the request: the HTML received, the first
paint of the page's content, DOMContentLoaded (the page's text is there and its scripts have run), the load event,
and every chart drawn. plotly.js (1.4 MB) is fetched by telemetry/charts.js once the page's text is shown, so
DOMContentLoaded should be near the HTML and only the charts wait for it. Nothing here asserts a bar: the numbers
are for people to judge (a shared or busy machine reads slower).
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any

from benchmarks import bench_api as bench  # creates the benchmark's database and settles Django's settings

VISITS = int(os.environ.get("BENCH_PAGE_VISITS", "5"))


def visits(browser: Any, base: str, cookie: str, path: str) -> dict[str, Any]:
    cold, warm = [], []
    for _ in range(VISITS):
        context = browser.new_context()  # a new profile each time: nothing cached
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        cold.append(bench.page_visit(context, base + path))
        warm.append(bench.page_visit(context, base + path))
        context.close()

    def medians(seen: list[dict[str, float]]) -> dict[str, float]:
        return {f"{key}_seconds" if key != "bytes" else key: round(statistics.median(v[key] for v in seen), 3) for key in seen[0]}

    return {"cold": medians(cold), "warm": medians(warm)}


def main() -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from playwright.sync_api import sync_playwright

    from benchmarks.queue_fill import GPUS, NODES, add_running
    from jobs.cluster.simulated import SimulatedCluster
    from jobs.models import Job
    from jobs.services import nodes_sync

    chromium = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        print(json.dumps({"name": "page_load", "skipped": f"needs Chromium at {chromium} (BENCH_CHROMIUM)"}), flush=True)
        return
    call_command("migrate", verbosity=0)
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=NODES, gpus_per_node=GPUS, racks=2).list_nodes())
    owner = get_user_model().objects.create_user(username="reader")
    add_running(owner)
    job = Job.objects.filter(owner=owner).order_by("pk").first()
    assert job is not None
    server = bench.Server()
    cookie = bench.session_signed_in(owner).cookies["sessionid"] or ""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"], headless=True)
        for name, path in (("job_page", f"/jobs/{job.pk}/"), ("dashboard", "/dashboard/")):
            print(
                json.dumps({"name": f"page_load_{name}", "path": path, "visits": VISITS, **visits(browser, server.base, cookie, path)}),
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
